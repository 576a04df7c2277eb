-- Fettle for Neovim (0.11+): `require('fettle').setup({...})` configures
-- and enables the server, draws ghost text (the plugin's own renderer on
-- 0.11, Neovim's `vim.lsp.inline_completion` on 0.12+), and answers the
-- protocol extensions that keep the agent's edits and the disk as one
-- text. Without setup(), for `vim.lsp.start`:
--
--   local fettle = require('fettle')
--   vim.lsp.start({
--     name = 'fettle', cmd = { 'fettle' },
--     capabilities = fettle.capabilities(),
--     handlers = fettle.handlers,
--   })
--
-- Loading it also makes an accepted Fettle menu item (the fallback for
-- clients without inline completion) insert the whole suggestion and count
-- the acceptance when only 'omnifunc' is used (see fettle/completion.lua).
local M = {}

require('fettle.completion').setup()

--- The client capabilities to advertise: Neovim's defaults plus
--- `experimental.fettle.saveDocuments = true` (Fettle then asks Neovim to
--- save the buffers it edits, so a later `:w` does not warn that the file
--- changed since reading it).
--- @param base table|nil capabilities to extend (default: Neovim's own)
--- @return table
function M.capabilities(base)
  local caps = vim.deepcopy(base or vim.lsp.protocol.make_client_capabilities())
  caps.experimental = caps.experimental or {}
  caps.experimental.fettle = vim.tbl_extend('force', caps.experimental.fettle or {}, {
    saveDocuments = true,
  })
  return caps
end

--- The loaded buffer showing `uri`, without creating one.
local function find_buffer(uri)
  local wanted = vim.uri_to_fname(uri)
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      local name = vim.api.nvim_buf_get_name(bufnr)
      if name ~= '' and (name == wanted or vim.uv.fs_realpath(name) == vim.uv.fs_realpath(wanted)) then
        return bufnr
      end
    end
  end
  return nil
end

--- Writes one buffer; returns nil or the reason it was not saved.
local function save_buffer(bufnr)
  local bo = vim.bo[bufnr]
  if bo.buftype ~= '' then
    return 'not a file buffer'
  end
  if bo.readonly then
    return 'the buffer is read-only'
  end
  -- `write!`: Fettle asks only for files whose text on disk it manages at
  -- that moment; when it had to write one itself, a plain `:write` would
  -- stop at "The file has been changed since reading it" and wait for an
  -- answer (forever, in a headless Neovim).
  local ok, err = pcall(vim.api.nvim_buf_call, bufnr, function()
    vim.cmd('silent keepalt keepjumps write!')
  end)
  if not ok then
    return tostring(err)
  end
  if bo.modified then
    return 'the buffer is still modified after writing it'
  end
  return nil
end

--- `fettle/saveDocuments` {uris} → {saved = {uri...}, failed = {{uri, message}...}}.
function M.save_documents(_, params)
  local result = { saved = {}, failed = {} }
  for _, uri in ipairs((params or {}).uris or {}) do
    local bufnr = find_buffer(uri)
    local why = 'not open in Neovim'
    if bufnr then
      why = save_buffer(bufnr)
    end
    if why then
      table.insert(result.failed, { uri = uri, message = why })
    else
      table.insert(result.saved, uri)
    end
  end
  return result
end

--- Handlers for `vim.lsp.start({ handlers = ... })`.
M.handlers = {
  ['fettle/saveDocuments'] = M.save_documents,
  ['fettle/taskEvent'] = function(err, event)
    require('fettle.log').add(err, event)
    require('fettle.chat').event(event)
  end,
  ['window/showMessage'] = function(_, params)
    M.show_message(params or {})
    return vim.NIL
  end,
}

--- The server's `window/showMessage`. Neovim's own handler writes the text
--- with a trailing newline, and that stops the user at a "Press ENTER"
--- prompt after every undo or `fettle.toml` reload; here information is
--- one line that fits the command line, the whole text in |:Fettle-log|;
--- warnings and errors are shown whole.
function M.show_message(params)
  local text = vim.trim(params.message or '')
  local levels = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }
  local level = levels[params.type] or vim.log.levels.INFO
  require('fettle.log').add(nil, { taskId = 'server', kind = 'message', text = text })
  if level >= vim.log.levels.INFO then
    local first = vim.split(text, '\n', { plain = true })[1] or ''
    text = M.fit_line(first)
  end
  vim.notify(text, level)
end

--- Whether Neovim draws ghost text itself (0.12+: `vim.lsp.inline_completion`).
function M.native_ghost_text()
  local native = vim.lsp.inline_completion
  return native ~= nil and native.enable ~= nil and M.options.ghost_text.native ~= false
end

M.options = {
  ghost_text = {
    enabled = true,
    debounce_ms = 40,
    --- `'auto'`: Neovim's own inline completion when it has one (0.12+).
    native = 'auto',
    --- Report where the cursor rests (`fettle/cursor`), so that the
    --- embedded model prepares the prompt there before you type.
    warm_up = true,
    --- Insert-mode keys; `false` leaves a key unmapped. Accept and dismiss
    --- fall back to the key's own meaning when nothing is shown.
    keymaps = {
      accept = '<Tab>',
      accept_word = '<M-w>',
      accept_line = '<M-l>',
      next = '<M-]>',
      prev = '<M-[>',
      dismiss = '<C-]>',
    },
  },
}

local ghost = require('fettle.ghost')

--- Accepts the whole suggestion; returns whether there was one.
function M.accept()
  if M.native_ghost_text() then
    return vim.lsp.inline_completion.get() or false
  end
  return ghost.accept()
end

--- Accepts the suggestion's next word.
function M.accept_word()
  return ghost.accept_word()
end

--- Accepts the rest of the suggestion's current line.
function M.accept_line()
  return ghost.accept_line()
end

--- Shows the next suggestion (asks for several when none is shown).
function M.next()
  if M.native_ghost_text() then
    local native = vim.lsp.inline_completion
    return (native.select or native.jump)({ count = 1 })
  end
  ghost.cycle(1)
end

--- Shows the previous suggestion.
function M.prev()
  if M.native_ghost_text() then
    local native = vim.lsp.inline_completion
    return (native.select or native.jump)({ count = -1 })
  end
  ghost.cycle(-1)
end

--- Hides the suggestion.
function M.dismiss()
  ghost.dismiss()
end

--- Whether a suggestion is shown (the plugin's renderer only).
function M.is_visible()
  return ghost.is_visible()
end

--- Turns ghost text on or off; returns the new state.
function M.toggle()
  local on = ghost.toggle()
  if M.native_ghost_text() then
    vim.lsp.inline_completion.enable(on)
  end
  return on
end

--- Buffer-local insert-mode keys for ghost text.
local function map_keys(bufnr)
  local keys = M.options.ghost_text.keymaps or {}
  local function map(name, fallback, desc)
    local lhs = keys[name]
    if not lhs then
      return
    end
    vim.keymap.set('i', lhs, function()
      if M.native_ghost_text() then
        if name == 'accept' then
          -- Neovim's own: accepts, or says there was nothing to accept.
          return vim.lsp.inline_completion.get() and '' or lhs
        end
        return ('<Cmd>lua require("fettle").%s()<CR>'):format(name)
      end
      if ghost.is_visible() then
        return ('<Cmd>lua require("fettle").%s()<CR>'):format(name)
      end
      if name == 'next' or name == 'prev' then
        return ('<Cmd>lua require("fettle").%s()<CR>'):format(name)
      end
      return fallback and lhs or ''
    end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'Fettle: ' .. desc })
  end
  map('accept', true, 'accept the suggestion')
  map('accept_word', false, "accept the suggestion's next word")
  map('accept_line', false, "accept the suggestion's line")
  map('next', false, 'next suggestion')
  map('prev', false, 'previous suggestion')
  map('dismiss', true, 'hide the suggestion')
end

--- Ghost text in a buffer the Fettle client attached to.
local function on_attach(bufnr, client)
  if not client.server_capabilities.inlineCompletionProvider then
    return
  end
  if M.native_ghost_text() then
    vim.lsp.inline_completion.enable(ghost.config.enabled, { bufnr = bufnr })
  else
    ghost.attach(bufnr)
  end
  require('fettle.cursor').attach(bufnr)
  map_keys(bufnr)
end

--- `text` shortened to what fits on the command line without a prompt.
function M.fit_line(text)
  local room = math.max(10, vim.v.echospace - 1)
  if vim.fn.strdisplaywidth(text) <= room then
    return text
  end
  return vim.fn.strcharpart(text, 0, room - 1) .. '…'
end

--- Shows `bufnr` (a scratch buffer: the log, the statistics): focuses
--- its window, or opens one at the bottom.
function M.focus_split(bufnr)
  local win = vim.fn.bufwinid(bufnr)
  if win == -1 then
    vim.cmd('botright split')
    vim.api.nvim_win_set_buf(0, bufnr)
  else
    vim.api.nvim_set_current_win(win)
  end
end

--- Runs `update` on the scratch buffer `bufnr` (made modifiable for it);
--- its windows that were at the last line follow to the new last line,
--- one scrolled back stays where it is.
function M.keep_following(bufnr, update)
  local following = {}
  for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= vim.api.nvim_buf_line_count(bufnr) then
      table.insert(following, win)
    end
  end
  vim.bo[bufnr].modifiable = true
  update()
  vim.bo[bufnr].modifiable = false
  for _, win in ipairs(following) do
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(bufnr), 0 })
  end
end

--- Configures and enables the server (Neovim 0.11+ `vim.lsp.config` /
--- `vim.lsp.enable`): `opts.cmd` (default `{ 'fettle' }`), `opts.filetypes`,
--- `opts.root_markers`, `opts.settings` (sent as `initializationOptions`
--- and answered to `workspace/configuration`), and `opts.ghost_text`
--- (`enabled`, `debounce_ms`, `native`, `keymaps`; see |fettle-ghost-text|).
function M.setup(opts)
  opts = opts or {}
  M.options = vim.tbl_deep_extend('force', M.options, { ghost_text = opts.ghost_text or {}, progress = opts.progress })
  ghost.config.enabled = M.options.ghost_text.enabled ~= false
  ghost.config.debounce_ms = M.options.ghost_text.debounce_ms
  require('fettle.cursor').config.enabled = M.options.ghost_text.warm_up ~= false
  ghost.highlights()
  vim.api.nvim_create_autocmd('ColorScheme', {
    group = vim.api.nvim_create_augroup('fettle.highlights', { clear = true }),
    callback = ghost.highlights,
  })
  if M.options.progress ~= false then
    -- `$/progress` of rewrites and tasks (Neovim keeps it for
    -- `vim.lsp.status()`; this echoes it, for users whose statusline does
    -- not show it).
    vim.api.nvim_create_autocmd('LspProgress', {
      group = vim.api.nvim_create_augroup('fettle.progress', { clear = true }),
      callback = function(ev)
        local client = vim.lsp.get_client_by_id(ev.data.client_id)
        local value = vim.tbl_get(ev.data, 'params', 'value')
        if not client or client.name ~= 'fettle' or type(value) ~= 'table' then
          return
        end
        local text = value.kind == 'end' and ((value.message or 'done')) or
          table.concat(vim.tbl_filter(function(s) return s ~= '' end, {
            value.title or '', value.percentage and (value.percentage .. '%') or '', value.message or '' }), ' ')
        text = text:gsub('\n', ' ')
        if not vim.startswith(text, 'Fettle') then
          text = 'Fettle: ' .. text
        end
        -- One screen line: a longer echo would stop the user at a
        -- "Press ENTER" prompt for every report.
        vim.api.nvim_echo({ { M.fit_line(text), 'ModeMsg' } }, false, {})
      end,
    })
  end
  vim.api.nvim_create_autocmd('LspAttach', {
    group = vim.api.nvim_create_augroup('fettle.attach', { clear = true }),
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == 'fettle' then
        on_attach(ev.buf, client)
      end
    end,
  })
  vim.lsp.config('fettle', {
    cmd = opts.cmd or { 'fettle' },
    filetypes = opts.filetypes,
    root_markers = opts.root_markers or { 'fettle.toml', '.git' },
    capabilities = M.capabilities(opts.capabilities),
    handlers = M.handlers,
    init_options = opts.settings,
    settings = opts.settings and { fettle = opts.settings } or nil,
  })
  vim.lsp.enable('fettle')
end

return M

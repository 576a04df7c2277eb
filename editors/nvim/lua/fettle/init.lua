-- Fettle for Neovim (0.11+): the protocol extensions Neovim must answer.
-- The full plugin (ghost text, commands, UI) comes later; this part keeps
-- the agent's edits and the disk as one text:
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
  end,
}

--- Configures and enables the server (Neovim 0.11+ `vim.lsp.config` /
--- `vim.lsp.enable`): `opts.cmd` (default `{ 'fettle' }`), `opts.filetypes`,
--- `opts.root_markers`, and `opts.settings` (sent as `initializationOptions`
--- and answered to `workspace/configuration`).
function M.setup(opts)
  opts = opts or {}
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

-- `:Fettle` subcommands: rewrite a range with an instruction, fix the
-- buffer's diagnostics, undo or cancel the agent's task, show statistics.
-- Every request is asynchronous: a rewrite or a task takes seconds, and
-- Neovim must stay usable meanwhile.
local M = {}

--- The Fettle client attached to `bufnr`, or nil with a message.
local function client_for(bufnr)
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'fettle' })[1]
  if not client then
    vim.notify('Fettle is not attached to this buffer', vim.log.levels.WARN)
  end
  return client
end

--- For what concerns the workspace, not a buffer (undo, cancel, stats):
--- the client attached to the current buffer, else any Fettle client —
--- so that `:Fettle undo` works from the log or the diff too.
local function workspace_client()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'fettle' })[1]
    or vim.lsp.get_clients({ name = 'fettle' })[1]
  if not client then
    vim.notify('Fettle is not running (open a file of the workspace first)', vim.log.levels.WARN)
  end
  return client
end

local function execute(client, bufnr, command, argument, on_result, on_error)
  client:request('workspace/executeCommand', {
    command = command,
    arguments = { argument },
  }, function(err, result)
    if err then
      local text = err.message or vim.inspect(err)
      vim.notify('Fettle: ' .. text, vim.log.levels.ERROR)
      if on_error then
        on_error(text)
      end
      return
    end
    if on_result then
      on_result(result)
    end
  end, bufnr)
end

--- Rewrites lines `line1`..`line2` (1-based, inclusive) of the current
--- buffer as `instruction` says; prompts for it when it is empty.
function M.rewrite(line1, line2, instruction)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then
    return
  end
  local function run(text)
    if not text or vim.trim(text) == '' then
      return
    end
    local argument = {
      uri = vim.uri_from_bufnr(bufnr),
      -- Whole lines: from the first line's start to the next line's start.
      range = {
        start = { line = line1 - 1, character = 0 },
        ['end'] = { line = line2, character = 0 },
      },
      instruction = text,
      version = vim.lsp.util.buf_versions[bufnr],
    }
    execute(client, bufnr, 'fettle.rewrite', argument, function(result)
      if result and not result.applied then
        -- The server has shown why; keep it in :messages too.
        vim.notify('Fettle: ' .. (result.summary or 'not applied'), vim.log.levels.WARN)
      elseif result then
        vim.notify('Fettle: ' .. result.summary, vim.log.levels.INFO)
      end
    end)
  end
  if instruction and vim.trim(instruction) ~= '' then
    run(instruction)
  else
    vim.ui.input({ prompt = 'Fettle rewrite: ' }, run)
  end
end

--- The end of a task (chat or fix): a short summary, and the result kept
--- for `:Fettle diff`.
function M.task_ended(result)
  result = result or {}
  M.last_result = result
  -- :Fettle diff shows the last change: a follow-up that only answered
  -- ("what did you change?") must not hide it.
  if #(result.changedFiles or {}) > 0 then
    M.last_change = result
  end
  -- The whole summary (what was tried, what still fails, why the tests
  -- could not run) is kept in :Fettle log; the notification is its first line.
  if result.summary and result.summary ~= '' then
    require('fettle.log').add(nil, { taskId = result.taskId, kind = 'summary', text = result.summary })
  end
  local changed = #(result.changedFiles or {})
  local level = result.status == 'success' and vim.log.levels.INFO or vim.log.levels.WARN
  local tail = ''
  if changed > 0 then
    tail = (' (%d file%s changed: :Fettle diff, :Fettle undo)'):format(changed, changed == 1 and '' or 's')
  end
  -- One line (a longer message stops the user at a "Press ENTER" prompt):
  -- the summary first, the hint about :Fettle diff only if it fits too;
  -- the whole summary is in :Fettle log.
  local summary = vim.split(vim.trim(result.summary or ''), '\n', { plain = true })[1] or ''
  local head = ('Fettle: %s — '):format(result.status or '?')
  local room = math.max(10, vim.v.echospace - 1)
  local width = vim.fn.strdisplaywidth
  if width(head .. summary .. tail) > room then
    tail = ''
  end
  vim.notify(require('fettle').fit_line(head .. summary .. tail), level)
end

--- Opens the diff of the last finished task that changed files, in a split.
function M.diff()
  local result = M.last_change
  if not result or not result.diff or result.diff == '' then
    vim.notify('Fettle: no finished task with changes in this session', vim.log.levels.WARN)
    return
  end
  local name = 'fettle://diff/' .. (result.taskId or 'last')
  local bufnr = vim.fn.bufnr(name)
  if bufnr < 0 then
    bufnr = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(bufnr, name)
    vim.bo[bufnr].bufhidden = 'hide'
    vim.bo[bufnr].filetype = 'diff'
  end
  vim.bo[bufnr].modifiable = true
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, vim.split(result.diff, '\n', { plain = true, trimempty = true }))
  vim.bo[bufnr].modifiable = false
  vim.cmd('botright split')
  vim.api.nvim_win_set_buf(0, bufnr)
end

--- Runs the repair loop with `message` as the goal; the lines
--- `line1`..`line2` are its context when the command had a range. It
--- continues the conversation of the chats before (in `fettle://chat`),
--- unless `new` (`:Fettle chat!`).
function M.chat(message, line1, line2, has_range, new)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then
    return
  end
  if not message or vim.trim(message) == '' then
    vim.notify('Fettle: say what to do, e.g. :Fettle chat make the tests pass', vim.log.levels.WARN)
    return
  end
  local chat = require('fettle.chat')
  local continued = not new and chat.turns > 0
  local argument = { message = message, uri = vim.uri_from_bufnr(bufnr), continue = continued }
  if has_range then
    argument.range = {
      start = { line = line1 - 1, character = 0 },
      ['end'] = { line = line2, character = 0 },
    }
  end
  chat.begin(message, continued)
  vim.notify('Fettle: working on it (fettle://chat shows what it does)', vim.log.levels.INFO)
  execute(client, bufnr, 'fettle.chat', argument, function(result)
    chat.finish(result)
    M.task_ended(result)
  end, function(text)
    chat.finish({ status = 'error', summary = text })
  end)
end

--- Runs the repair loop on the current buffer's diagnostics.
function M.fix()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if client then
    vim.notify('Fettle: fixing this file (:Fettle log shows what it does)', vim.log.levels.INFO)
    execute(client, bufnr, 'fettle.fixDiagnostics', { uri = vim.uri_from_bufnr(bufnr) }, M.task_ended)
  end
end

--- Restores what the last task changed; `force` (`:Fettle undo!`) also
--- the files changed since, losing those changes. The server says what
--- it restored (one message: two would stop at a "Press ENTER" prompt).
function M.undo(force)
  local client = workspace_client()
  if client then
    local argument = force and { force = true } or vim.empty_dict()
    execute(client, nil, 'fettle.undo', argument)
  end
end

--- Cancels the running task.
function M.cancel()
  local client = workspace_client()
  if client then
    execute(client, nil, 'fettle.cancel', vim.empty_dict())
  end
end

--- `fettle/stats` as `key: value` lines, nested keys joined by dots.
function M.stats_lines(value, prefix, out)
  out = out or {}
  prefix = prefix or ''
  if type(value) ~= 'table' then
    table.insert(out, ('%s: %s'):format(prefix, vim.inspect(value)))
    return out
  end
  local keys = vim.tbl_keys(value)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  if #keys == 0 then
    table.insert(out, prefix .. ': (none)')
  end
  for _, key in ipairs(keys) do
    local name = prefix == '' and tostring(key) or (prefix .. '.' .. tostring(key))
    M.stats_lines(value[key], name, out)
  end
  return out
end

--- Shows `fettle/stats` in a scratch buffer, one figure a line.
function M.stats()
  local client = workspace_client()
  if not client then
    return
  end
  client:request('fettle/stats', vim.empty_dict(), function(err, result)
    if err then
      vim.notify('Fettle: ' .. err.message, vim.log.levels.ERROR)
      return
    end
    local name = 'fettle://stats'
    local bufnr = vim.fn.bufnr(name)
    if bufnr < 0 then
      bufnr = vim.api.nvim_create_buf(false, true)
      vim.api.nvim_buf_set_name(bufnr, name)
      vim.bo[bufnr].bufhidden = 'hide'
    end
    vim.bo[bufnr].modifiable = true
    vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, M.stats_lines(result or {}))
    vim.bo[bufnr].modifiable = false
    require('fettle').focus_split(bufnr)
  end)
end

M.subcommands = { 'chat', 'rewrite', 'fix', 'undo', 'cancel', 'stats', 'log', 'toggle', 'diff' }

--- `:Fettle {subcommand} [args]` (a range for `rewrite`).
function M.dispatch(opts)
  local sub, rest = opts.args:match('^%s*(%S*)%s*(.-)%s*$')
  -- `:Fettle! undo` and `:Fettle undo!` alike.
  local bang = opts.bang
  if sub:sub(-1) == '!' then
    sub, bang = sub:sub(1, -2), true
  end
  if sub == 'rewrite' then
    M.rewrite(opts.line1, opts.line2, rest)
  elseif sub == 'chat' then
    M.chat(rest, opts.line1, opts.line2, opts.range > 0, bang)
  elseif sub == 'log' then
    require('fettle.log').open()
  elseif sub == 'fix' then
    M.fix()
  elseif sub == 'undo' then
    M.undo(bang)
  elseif sub == 'cancel' then
    M.cancel()
  elseif sub == 'stats' then
    M.stats()
  elseif sub == 'toggle' then
    local on = require('fettle').toggle()
    vim.notify('Fettle: ghost text ' .. (on and 'on' or 'off'), vim.log.levels.INFO)
  elseif sub == 'diff' then
    M.diff()
  else
    vim.notify('Fettle: unknown subcommand ' .. vim.inspect(sub) .. '; one of: '
      .. table.concat(M.subcommands, ', '), vim.log.levels.ERROR)
  end
end

return M

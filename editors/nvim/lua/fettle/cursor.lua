--- Reports where the cursor rests (`fettle/cursor`), so that the server
--- can evaluate the embedded model's prompt there before the first
--- keystroke (a warm-up; see |fettle-warm-up|). Sent on entering a buffer
--- and when the cursor stops moving in normal mode, at most one per
--- `delay_ms`; typing is reported by the edits themselves.
local M = {}

M.config = { enabled = true, delay_ms = 150 }

local timers = {}

local function report(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'fettle' })[1]
  if not client then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  client:notify('fettle/cursor', { textDocument = params.textDocument, position = params.position })
end

local function schedule(bufnr)
  local timer = timers[bufnr]
  if not timer then
    timer = vim.uv.new_timer()
    timers[bufnr] = timer
  end
  timer:stop()
  timer:start(M.config.delay_ms, 0, vim.schedule_wrap(function()
    report(bufnr)
  end))
end

--- Starts the reports for `bufnr` (on LspAttach of the Fettle client).
function M.attach(bufnr)
  if not M.config.enabled then
    return
  end
  local group = vim.api.nvim_create_augroup(('fettle.cursor.%d'):format(bufnr), { clear = true })
  vim.api.nvim_create_autocmd({ 'CursorMoved', 'BufEnter' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      schedule(bufnr)
    end,
  })
  vim.api.nvim_create_autocmd({ 'BufUnload', 'LspDetach' }, {
    group = group,
    buffer = bufnr,
    callback = function(ev)
      if require('fettle.ghost').other_client_detached(ev) then
        return
      end
      local timer = timers[bufnr]
      if timer then
        timer:stop()
        timer:close()
        timers[bufnr] = nil
      end
      pcall(vim.api.nvim_del_augroup_by_id, group)
    end,
  })
  schedule(bufnr)
end

return M

-- `:Fettle log`: what the agent and rewrites did, from `fettle/taskEvent`,
-- in a scratch buffer that follows the events as they come.
local M = {}

local NAME = 'fettle://log'
--- Every line so far (kept while the buffer is closed, to show on open).
local lines = {}
local MAX_LINES = 5000

local function buffer()
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(bufnr) == NAME then
      return bufnr
    end
  end
  return nil
end

--- One event as log lines: `[task] kind: text`. Streamed model text is
--- appended to the previous line, as it was written.
local last_text_task
local function render(event)
  local text = event.text or ''
  if event.kind == 'text' then
    if last_text_task == event.taskId and #lines > 0 then
      local parts = vim.split(text, '\n', { plain = true })
      lines[#lines] = lines[#lines] .. parts[1]
      for i = 2, #parts do
        table.insert(lines, '  ' .. parts[i])
      end
      return
    end
    last_text_task = event.taskId
  else
    last_text_task = nil
  end
  local parts = vim.split(text, '\n', { plain = true })
  table.insert(lines, ('[%s] %s: %s'):format(event.taskId or '?', event.kind or '?', parts[1]))
  for i = 2, #parts do
    table.insert(lines, '  ' .. parts[i])
  end
end

--- The `fettle/taskEvent` handler.
function M.add(_, event)
  render(event or {})
  while #lines > MAX_LINES do
    table.remove(lines, 1)
  end
  local bufnr = buffer()
  if bufnr then
    require('fettle').keep_following(bufnr, function()
      vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
    end)
  end
end

--- The log's lines (for tests and statuslines).
function M.lines()
  return vim.deepcopy(lines)
end

--- Opens the log in a split (or focuses it).
function M.open()
  local bufnr = buffer()
  if not bufnr then
    bufnr = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(bufnr, NAME)
    vim.bo[bufnr].bufhidden = 'hide'
    vim.bo[bufnr].filetype = 'fettlelog'
  end
  vim.bo[bufnr].modifiable = true
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  vim.bo[bufnr].modifiable = false
  require('fettle').focus_split(bufnr)
  -- The newest events first in view: the log is read from its end.
  vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(bufnr), 0 })
  return bufnr
end

return M

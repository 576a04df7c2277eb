-- `:Fettle chat`: a conversation with the agent in `fettle://chat`. Each
-- message runs the repair loop; the model's text streams in, its tool
-- calls, edits and checks appear as they happen, and the summary ends the
-- turn. A follow-up continues the conversation (the server tells the model
-- the earlier requests, their results and changes); `:Fettle chat!`
-- starts a new one.

local M = {}

-- Lines shown below a step in the conversation.
local MAX_DETAIL_LINES = 8

local NAME = 'fettle://chat'
--- Chats finished in this conversation (a follow-up continues it).
M.turns = 0
--- The running chat: `{ task = id or nil }` until it ends.
M.running = nil
local streaming = false

local function buffer()
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(bufnr) == NAME then
      return bufnr
    end
  end
  local bufnr = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(bufnr, NAME)
  vim.bo[bufnr].bufhidden = 'hide'
  vim.bo[bufnr].filetype = 'markdown'
  vim.bo[bufnr].modifiable = false
  return bufnr
end

--- Appends `lines`; with `join`, the first goes on the end of the last
--- line (streamed text). Windows at the end follow.
local function append(lines, join)
  local bufnr = buffer()
  require('fettle').keep_following(bufnr, function()
    local count = vim.api.nvim_buf_line_count(bufnr)
    local empty = count == 1 and vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1] == ''
    if join and not empty then
      local last = vim.api.nvim_buf_get_lines(bufnr, count - 1, count, false)[1] or ''
      lines = vim.list_extend({ last .. lines[1] }, lines, 2)
      vim.api.nvim_buf_set_lines(bufnr, count - 1, count, false, lines)
    elseif empty then
      vim.api.nvim_buf_set_lines(bufnr, 0, 1, false, lines)
    else
      vim.api.nvim_buf_set_lines(bufnr, count, count, false, lines)
    end
  end)
end

--- Shows the conversation in a split, unless it is shown; the cursor stays
--- where it was.
function M.show()
  local bufnr = buffer()
  if #vim.fn.win_findbuf(bufnr) > 0 then
    return
  end
  local from = vim.api.nvim_get_current_win()
  vim.cmd('botright vsplit')
  vim.api.nvim_win_set_buf(0, bufnr)
  vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(bufnr), 0 })
  vim.api.nvim_set_current_win(from)
end

--- A message sent; `continued` when it follows the earlier ones.
function M.begin(message, continued)
  if not continued then
    M.turns = 0
    if vim.api.nvim_buf_line_count(buffer()) > 1 then
      append({ '', '--- new conversation ---' })
    end
  end
  M.running = {}
  streaming = false
  append({ '', 'You: ' .. message, '', 'Fettle:' })
  M.show()
end

--- A `fettle/taskEvent`: the running chat's events go in the conversation.
function M.event(event)
  local running = M.running
  if not running or type(event) ~= 'table' then
    return
  end
  local text = event.text or ''
  if not running.task then
    -- The agent's first event names the task.
    if event.kind == 'status' and text:match('^Started:') then
      running.task = event.taskId
    else
      return
    end
  end
  if event.taskId ~= running.task then
    return
  end
  local parts = vim.split(text, '\n', { plain = true })
  if event.kind == 'text' then
    if not streaming then
      append({ '' })
      streaming = true
    end
    append(parts, true)
    return
  end
  streaming = false
  -- A step's first line; what follows a status (the suspects, a test
  -- command's last lines) indented below, a few lines at most.
  local shown = { '  · ' .. parts[1] }
  local detail = event.kind == 'status' and MAX_DETAIL_LINES or 0
  for i = 2, math.min(#parts, detail + 1) do
    table.insert(shown, '    ' .. parts[i])
  end
  append(shown)
end

--- The chat's result: its summary ends the turn.
function M.finish(result)
  result = result or {}
  M.running = nil
  streaming = false
  if result.conversation and result.conversation.turns then
    M.turns = result.conversation.turns
  elseif result.taskId then
    M.turns = M.turns + 1
  end
  local lines = { '', ('[%s]'):format(result.status or '?') }
  vim.list_extend(lines, vim.split(vim.trim(result.summary or ''), '\n', { plain = true }))
  local changed = #(result.changedFiles or {})
  if changed > 0 then
    table.insert(lines, ('(%d file%s changed: :Fettle diff, :Fettle undo)'):format(changed, changed == 1 and '' or 's'))
  end
  append(lines)
end

--- The conversation's lines (for tests).
function M.lines()
  return vim.api.nvim_buf_get_lines(buffer(), 0, -1, false)
end

return M

-- Ghost text from `textDocument/inlineCompletion` for Neovim 0.11, which
-- has no inline completion of its own (0.12's `vim.lsp.inline_completion`
-- is used instead when present: see fettle/init.lua).
--
-- While typing in insert mode: one request per pause (debounced), one in
-- flight (the previous one is cancelled when the next is sent), and an
-- answer is drawn only where it still fits: the buffer unchanged since the
-- request, or changed only by typing, at the cursor, the start of the
-- suggestion. The first line is drawn inline at the cursor, the others as
-- virtual lines below. Typing what the suggestion says keeps the rest on
-- screen (no new request); anything else clears it.
local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('fettle.ghost')

M.ns = ns

--- Options (set by `require('fettle').setup({ ghost_text = ... })`).
M.config = {
  enabled = true,
  --- Wait this long after the last keystroke before asking.
  debounce_ms = 40,
}

--- Visible suggestions, per buffer: {
---   row (0-based), col (the cursor's byte column when they were drawn),
---   head (the line before the request's cursor), after (the line after it),
---   items = { { text, scol, closers, command, client_id } }, index,
---   extmark, accepted (the acceptance was already sent) }
local shown = {}
--- The request in flight, per buffer: { client, id }.
local inflight = {}
--- The debounce timer, per buffer.
local timers = {}

--- Counters for tests and `:checkhealth` (answers drawn, dropped as stale).
M.counters = { requested = 0, drawn = 0, stale = 0, cancelled = 0 }
--- Milliseconds from a request to its suggestion on screen (the last 100).
M.latencies = {}

local function fettle_client(bufnr)
  for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr, name = 'fettle' })) do
    if client.server_capabilities.inlineCompletionProvider then
      return client
    end
  end
  return nil
end

local function in_insert_mode()
  return api.nvim_get_mode().mode:sub(1, 1) == 'i'
end

local function cursor()
  local pos = api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

local function line_at(bufnr, row)
  return api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
end

--- What is left of `item` to insert when the cursor is at byte `col` of
--- `line`, or nil when the line no longer fits the suggestion: the text
--- before the request's cursor (`s.head`) and after it (`s.after`) must be
--- unchanged, and what was typed between them must start the suggestion.
local function remaining(s, item, line, col)
  local req = #s.head
  if col < req or line:sub(1, req) ~= s.head then
    return nil
  end
  local typed_len = #line - #s.after - req
  if typed_len < 0 or line:sub(req + typed_len + 1) ~= s.after or col ~= req + typed_len then
    return nil
  end
  -- From where the item's range starts (it may start before the cursor:
  -- the word being typed) to the cursor.
  local typed = line:sub(item.scol + 1, col)
  if item.text:sub(1, #typed) ~= typed then
    return nil
  end
  return item.text:sub(#typed + 1)
end

local function clear_extmark(bufnr)
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  end
end

--- Draws `rest` (what is left of the current item) at the cursor.
local function draw(bufnr, s, rest, row, col, line)
  clear_extmark(bufnr)
  local item = s.items[s.index]
  local lines = vim.split(rest, '\n', { plain = true })
  -- Closers after the cursor that the suggestion re-types (`range` ends
  -- past the cursor): when the suggestion is one line ending with them,
  -- draw it without them, so that the closers on screen follow it as they
  -- will after accepting.
  local closers = line:sub(col + 1, col + item.closers)
  if #lines == 1 and closers ~= '' and vim.endswith(lines[1], closers) then
    lines[1] = lines[1]:sub(1, #lines[1] - #closers)
  end
  local hl = 'FettleGhostText'
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], hl } })
  end
  local mark = {
    virt_text_pos = 'inline',
    hl_mode = 'combine',
    priority = 200,
  }
  local counter = #s.items > 1 and { (' (%d/%d)'):format(s.index, #s.items), 'FettleGhostTextCounter' } or nil
  if lines[1] ~= '' then
    mark.virt_text = { { lines[1], hl } }
  end
  if #virt_lines > 0 then
    if counter then
      table.insert(virt_lines[#virt_lines], counter)
    end
    mark.virt_lines = virt_lines
  elseif counter then
    mark.virt_text = mark.virt_text or {}
    table.insert(mark.virt_text, counter)
  end
  if not mark.virt_text and not mark.virt_lines then
    return false
  end
  s.extmark = api.nvim_buf_set_extmark(bufnr, ns, row, col, mark)
  s.row, s.col = row, col
  return true
end

--- Clears what is shown in `bufnr` (the request in flight stays).
local function hide(bufnr)
  shown[bufnr] = nil
  clear_extmark(bufnr)
end

--- Re-draws the suggestion after the cursor moved or the text changed;
--- clears it when it no longer fits. Returns whether it is still shown.
local function sync(bufnr)
  local s = shown[bufnr]
  if not s then
    return false
  end
  local row, col = cursor()
  if api.nvim_get_current_buf() ~= bufnr or row ~= s.row or not in_insert_mode() then
    hide(bufnr)
    return false
  end
  local line = line_at(bufnr, row)
  if col == s.col and line == s.line then
    return true
  end
  local rest = remaining(s, s.items[s.index], line, col)
  if not rest or rest == '' or not draw(bufnr, s, rest, row, col, line) then
    hide(bufnr)
    return false
  end
  s.line = line
  return true
end

local function cancel_inflight(bufnr)
  local req = inflight[bufnr]
  if req then
    inflight[bufnr] = nil
    M.counters.cancelled = M.counters.cancelled + 1
    pcall(function()
      req.client:cancel_request(req.id)
    end)
  end
end

--- The items of an answer, as byte columns on the request's line.
local function items_of(result, client, line, row, col)
  local items = {}
  for _, raw in ipairs((result or {}).items or result or {}) do
    local text = raw.insertText
    if type(text) == 'table' then
      text = text.value
    end
    local scol, closers = col, 0
    local range = raw.range
    local ok = type(text) == 'string' and text ~= ''
    if ok and range then
      if range.start.line ~= row or range['end'].line ~= row then
        ok = false
      else
        local enc = client.offset_encoding
        scol = vim.str_byteindex(line, enc, range.start.character, false)
        local ecol = vim.str_byteindex(line, enc, range['end'].character, false)
        closers = math.max(0, ecol - col)
        ok = scol <= col
      end
    end
    if ok then
      table.insert(items, {
        text = text:gsub('\r\n', '\n'),
        scol = scol,
        closers = closers,
        command = raw.command,
        client_id = client.id,
      })
    end
  end
  return items
end

--- Shows the answer to a request made at (`row`, `col`) on `line`, if it
--- still fits what is in the buffer now.
local function record_latency(started)
  table.insert(M.latencies, (vim.uv.hrtime() - started) / 1e6)
  if #M.latencies > 100 then
    table.remove(M.latencies, 1)
  end
end

local function present(bufnr, client, result, row, col, line, started, cycling)
  local items = items_of(result, client, line, row, col)
  if #items == 0 then
    return
  end
  local s = {
    head = line:sub(1, col),
    after = line:sub(col + 1),
    items = items,
    index = 1,
    -- Asked for alternatives already: cycling goes round these.
    more = cycling ~= nil,
  }
  if cycling then
    -- Cycling from one suggestion: show the next that differs from it.
    for i = 0, #items - 1 do
      local at = ((cycling.step > 0 and i or -i) % #items) + 1
      if items[at].text ~= cycling.text then
        s.index = at
        break
      end
    end
    if items[s.index].text == cycling.text then
      M.counters.no_alternative = (M.counters.no_alternative or 0) + 1
      vim.notify('Fettle: no other suggestion here', vim.log.levels.INFO)
    end
  end
  local now_row, now_col = cursor()
  local now_line = line_at(bufnr, now_row)
  local rest = now_row == row and remaining(s, items[s.index], now_line, now_col)
  if not rest or rest == '' then
    M.counters.stale = M.counters.stale + 1
    return
  end
  if draw(bufnr, s, rest, now_row, now_col, now_line) then
    s.line = now_line
    shown[bufnr] = s
    M.counters.drawn = M.counters.drawn + 1
    record_latency(started)
  end
end

--- Asks for suggestions at the cursor now. `invoked`: an explicit request
--- (several items welcome) rather than one made while typing. `cycling`:
--- `{ text, step }` when asked for alternatives to the suggestion shown.
function M.request(bufnr, invoked, cycling)
  bufnr = bufnr or api.nvim_get_current_buf()
  local client = fettle_client(bufnr)
  if not client or not in_insert_mode() or api.nvim_get_current_buf() ~= bufnr then
    return
  end
  cancel_inflight(bufnr)
  local row, col = cursor()
  local line = line_at(bufnr, row)
  local tick = api.nvim_buf_get_changedtick(bufnr)
  local started = vim.uv.hrtime()
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = invoked and 1 or 2 }
  local id
  local ok, sent = client:request('textDocument/inlineCompletion', params, function(err, result)
    if inflight[bufnr] and inflight[bufnr].id == id then
      inflight[bufnr] = nil
    end
    if err or not result or not api.nvim_buf_is_valid(bufnr) then
      return
    end
    if api.nvim_get_current_buf() ~= bufnr or not in_insert_mode() or not M.config.enabled then
      M.counters.stale = M.counters.stale + 1
      return
    end
    if shown[bufnr] and api.nvim_buf_get_changedtick(bufnr) ~= tick then
      -- Something newer is on screen already.
      M.counters.stale = M.counters.stale + 1
      return
    end
    present(bufnr, client, result, row, col, line, started, cycling)
  end, bufnr)
  if ok then
    id = sent
    inflight[bufnr] = { client = client, id = id }
    M.counters.requested = M.counters.requested + 1
  end
end

local function stop_timer(bufnr)
  local timer = timers[bufnr]
  if timer then
    timers[bufnr] = nil
    timer:stop()
    timer:close()
  end
end

--- Asks after `debounce_ms` without a keystroke.
local function schedule(bufnr)
  stop_timer(bufnr)
  if not M.config.enabled then
    return
  end
  local timer = vim.uv.new_timer()
  if not timer then
    return
  end
  timers[bufnr] = timer
  timer:start(M.config.debounce_ms, 0, vim.schedule_wrap(function()
    if timers[bufnr] == timer then
      stop_timer(bufnr)
      M.request(bufnr, false)
    end
  end))
end

--- Clears the suggestion, the pending request and the one in flight.
function M.dismiss(bufnr)
  bufnr = bufnr or api.nvim_get_current_buf()
  stop_timer(bufnr)
  cancel_inflight(bufnr)
  hide(bufnr)
end

--- Whether a suggestion is shown in the current buffer.
function M.is_visible()
  return sync(api.nvim_get_current_buf())
end

--- The text shown (the rest of the current suggestion), for tests and
--- statuslines; nil when nothing is shown.
function M.current_text()
  local bufnr = api.nvim_get_current_buf()
  if not sync(bufnr) then
    return nil
  end
  local s = shown[bufnr]
  return remaining(s, s.items[s.index], line_at(bufnr, s.row), s.col)
end

--- Sends `fettle.acceptCompletion` for the current item (once).
local function count_acceptance(bufnr, s)
  if s.accepted then
    return
  end
  s.accepted = true
  local item = s.items[s.index]
  local client = vim.lsp.get_client_by_id(item.client_id)
  if client and item.command then
    client:exec_cmd(item.command, { bufnr = bufnr })
  end
end

--- Starts a new undo block, so that `u` after accepting removes the
--- suggestion only, not what was typed before it.
local function undo_break()
  vim.cmd('let &undolevels = &undolevels')
end

--- Accepts `part` bytes of what is left (nil: all of it). Returns whether
--- anything was inserted.
local function accept_part(pick)
  local bufnr = api.nvim_get_current_buf()
  if not sync(bufnr) then
    return false
  end
  local s = shown[bufnr]
  local item = s.items[s.index]
  local line = line_at(bufnr, s.row)
  local rest = remaining(s, item, line, s.col) or ''
  local part = pick and pick(rest) or rest
  if part == '' then
    return false
  end
  undo_break()
  local row, col = s.row, s.col
  local whole = #part == #rest
  local lines = vim.split(part, '\n', { plain = true })
  -- The whole suggestion replaces its range (closers it re-types
  -- included); a part is inserted at the cursor.
  local end_col = whole and (col + item.closers) or col
  count_acceptance(bufnr, s)
  hide(bufnr)
  stop_timer(bufnr)
  cancel_inflight(bufnr)
  api.nvim_buf_set_text(bufnr, row, col, row, end_col, lines)
  local new_row = row + #lines - 1
  local new_col = (#lines == 1 and col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { new_row + 1, new_col })
  if not whole then
    -- Keep showing the rest of this item (the others no longer fit).
    local new_line = line_at(bufnr, new_row)
    local left = {
      head = new_line:sub(1, new_col),
      after = new_line:sub(new_col + 1),
      items = { vim.tbl_extend('force', item, { text = rest:sub(#part + 1), scol = new_col }) },
      index = 1,
      accepted = true,
    }
    if draw(bufnr, left, left.items[1].text, new_row, new_col, new_line) then
      left.line = new_line
      shown[bufnr] = left
    end
  end
  return true
end

--- Accepts the whole suggestion.
function M.accept()
  return accept_part(nil)
end

--- Accepts the next word (with the spaces or punctuation before it); at
--- the end of a line, the line break and the next line's indentation.
function M.accept_word()
  return accept_part(function(rest)
    return rest:match('^\n[ \t]*') or rest:match('^[ \t]*[%w_]+') or rest:match('^[ \t]*[^%w_%s]+')
      or rest:match('^[ \t]+') or rest
  end)
end

--- Accepts the rest of the current line of the suggestion; at its end,
--- the next line.
function M.accept_line()
  return accept_part(function(rest)
    if rest:sub(1, 1) == '\n' then
      return rest:match('^\n[^\n]*')
    end
    return rest:match('^[^\n]*')
  end)
end

--- Shows the next (`step` 1) or previous (-1) suggestion; without any
--- shown, asks for several.
function M.cycle(step)
  local bufnr = api.nvim_get_current_buf()
  if not sync(bufnr) then
    M.request(bufnr, true)
    return
  end
  local s = shown[bufnr]
  if #s.items < 2 and not s.more then
    -- One suggestion shown (made while typing): ask for alternatives, as
    -- copilot.lua does; the one shown stays until they come.
    M.request(bufnr, true, { text = s.items[s.index].text, step = step })
    return
  end
  local line = line_at(bufnr, s.row)
  -- The next item that fits what was typed meanwhile.
  for _ = 1, #s.items do
    s.index = (s.index - 1 + step) % #s.items + 1
    local rest = remaining(s, s.items[s.index], line, s.col)
    if rest and rest ~= '' then
      draw(bufnr, s, rest, s.row, s.col, line)
      return
    end
  end
end

--- Turns ghost text on or off (all buffers); returns the new state.
function M.toggle(on)
  if on == nil then
    on = not M.config.enabled
  end
  M.config.enabled = on
  if not on then
    for bufnr in pairs(shown) do
      M.dismiss(bufnr)
    end
    for bufnr in pairs(inflight) do
      M.dismiss(bufnr)
    end
  end
  return on
end

--- Whether autocmd event `ev` is another client's LspDetach (not Fettle's).
function M.other_client_detached(ev)
  if ev.event ~= 'LspDetach' then
    return false
  end
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  return not client or client.name ~= 'fettle'
end

--- Starts ghost text in `bufnr` (on LspAttach of the Fettle client).
function M.attach(bufnr)
  local group = api.nvim_create_augroup(('fettle.ghost.%d'):format(bufnr), { clear = true })
  api.nvim_create_autocmd({ 'TextChangedI', 'TextChangedP' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      if not sync(bufnr) then
        schedule(bufnr)
      end
    end,
  })
  api.nvim_create_autocmd('InsertEnter', {
    group = group,
    buffer = bufnr,
    callback = function()
      schedule(bufnr)
    end,
  })
  api.nvim_create_autocmd('CursorMovedI', {
    group = group,
    buffer = bufnr,
    callback = function()
      sync(bufnr)
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.dismiss(bufnr)
    end,
  })
  api.nvim_create_autocmd({ 'BufUnload', 'LspDetach' }, {
    group = group,
    buffer = bufnr,
    callback = function(ev)
      if M.other_client_detached(ev) then
        return
      end
      M.dismiss(bufnr)
      pcall(api.nvim_del_augroup_by_id, group)
    end,
  })
end

--- Default colours: a comment's, in both colour modes. Neovim's default
--- `Comment` has only a GUI colour, so without 'termguicolors' (many
--- terminals, tmux without RGB) a link to it would draw ghost text exactly
--- like real text; grey 244 is what other ghost text uses there.
function M.highlights()
  local comment = api.nvim_get_hl(0, { name = 'Comment', link = false })
  api.nvim_set_hl(0, 'FettleGhostText', {
    default = true,
    fg = comment.fg or 0x808080,
    ctermfg = comment.ctermfg or 244,
    italic = true,
    cterm = { italic = true },
  })
  api.nvim_set_hl(0, 'FettleGhostTextCounter', { link = 'FettleGhostText', default = true })
end

return M

-- Accepting Fettle's menu item (`completion.as_completion_item`) when
-- Neovim's LSP completion is not enabled for the buffer: with only
-- 'omnifunc' (<C-x><C-o>), Neovim inserts the item's `word` (its first
-- line) and runs nothing on accept. This does for Fettle's items what
-- `vim.lsp.completion` does on accept (<C-y>): replace that word with the
-- whole suggestion and run the item's command, which counts the acceptance
-- in `fettle/stats`. Buffers where `vim.lsp.completion.enable()` was called
-- are left to Neovim.
local M = {}

--- Whether Neovim's own LSP completion handles accepts in `bufnr`
--- (`vim.lsp.completion.enable()` creates this group per buffer).
local function core_enabled(bufnr)
  return (pcall(vim.api.nvim_get_autocmds, { group = ('nvim.lsp.completion_%d'):format(bufnr) }))
end

function M.on_complete_done()
  if vim.v.event.reason ~= 'accept' then
    return
  end
  local done = vim.v.completed_item
  local data = vim.tbl_get(done or {}, 'user_data', 'nvim', 'lsp')
  local item = data and data.completion_item
  local client = data and vim.lsp.get_client_by_id(data.client_id)
  if not item or not client or vim.tbl_get(client, 'server_info', 'name') ~= 'fettle' then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  if core_enabled(bufnr) then
    return
  end
  -- The word Neovim inserted ends at the cursor and starts where the
  -- item's edit starts; the edit's text is the word being typed plus the
  -- suggestion.
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local word = done.word or ''
  if #word > col then
    return
  end
  vim.api.nvim_buf_set_text(bufnr, row - 1, col - #word, row - 1, col, { '' })
  local text = vim.tbl_get(item, 'textEdit', 'newText') or item.insertText or item.label
  if item.insertTextFormat == vim.lsp.protocol.InsertTextFormat.Snippet then
    vim.snippet.expand(text)
  else
    vim.api.nvim_put(vim.split(text, '\n', { plain = true }), 'c', false, true)
  end
  if item.command then
    client:exec_cmd(item.command, { bufnr = bufnr })
  end
end

--- Installs the CompleteDone handler (once; loading `fettle` does it).
function M.setup()
  vim.api.nvim_create_autocmd('CompleteDone', {
    group = vim.api.nvim_create_augroup('fettle.completion', { clear = true }),
    callback = M.on_complete_done,
    desc = "Fettle: insert the whole suggestion of an accepted menu item",
  })
end

return M

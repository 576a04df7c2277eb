-- `:Fettle {chat|rewrite|fix|undo|cancel|stats|log|toggle|diff}`, `:Fettle undo!`;
-- `:'<,'>Fettle rewrite [instruction]`. See :help fettle.
if vim.g.loaded_fettle then
  return
end
vim.g.loaded_fettle = true

vim.api.nvim_create_user_command('Fettle', function(opts)
  require('fettle.commands').dispatch(opts)
end, {
  nargs = '+',
  range = true,
  bang = true,
  desc = 'Fettle: chat, rewrite a range, fix diagnostics, undo or cancel a task, log, ghost text on/off',
  complete = function(arglead, cmdline)
    if cmdline:match('^%S*Fettle%s+%S*$') then
      return vim.tbl_filter(function(s)
        return vim.startswith(s, arglead)
      end, require('fettle.commands').subcommands)
    end
    return {}
  end,
})

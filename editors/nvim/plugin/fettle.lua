-- `:Fettle {rewrite|fix|undo|cancel|stats}`; `:'<,'>Fettle rewrite [instruction]`.
if vim.g.loaded_fettle then
  return
end
vim.g.loaded_fettle = true

vim.api.nvim_create_user_command('Fettle', function(opts)
  require('fettle.commands').dispatch(opts)
end, {
  nargs = '+',
  range = true,
  desc = 'Fettle: rewrite a range, fix diagnostics, undo or cancel a task, statistics',
  complete = function(arglead, cmdline)
    if cmdline:match('^%S*Fettle%s+%S*$') then
      return vim.tbl_filter(function(s)
        return vim.startswith(s, arglead)
      end, require('fettle.commands').subcommands)
    end
    return {}
  end,
})

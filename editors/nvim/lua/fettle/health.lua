-- `:checkhealth fettle`: the binary, the attached server, and the models.
local M = {}

function M.check()
  local health = vim.health
  health.start('fettle: the server binary')
  local config = vim.lsp.config.fettle or {}
  local cmd = type(config.cmd) == 'table' and config.cmd or { 'fettle' }
  local binary = cmd[1]
  if vim.fn.executable(binary) == 1 then
    local version = vim.system({ binary, '--version' }, { text = true }):wait(5000)
    if version.code == 0 then
      health.ok(('%s (%s)'):format(vim.trim(version.stdout or ''), vim.fn.exepath(binary)))
    else
      health.error(('%s --version failed: %s'):format(binary, vim.trim(version.stderr or '')))
    end
  else
    health.error(('%s is not executable'):format(binary), {
      'build it with `cargo build --release` and put target/release/fettle on PATH,',
      "or pass its path: require('fettle').setup({ cmd = { '/path/to/fettle' } })",
    })
  end
  if vim.fn.has('nvim-0.11') == 0 then
    health.error('Neovim 0.11 or newer is needed (vim.lsp.config / vim.lsp.enable)')
  end

  health.start('fettle: the server in this session')
  local clients = vim.lsp.get_clients({ name = 'fettle' })
  if #clients == 0 then
    health.warn('not running: open a file in a workspace (root markers: '
      .. table.concat(config.root_markers or { 'fettle.toml', '.git' }, ', ') .. ')')
    return
  end
  for _, client in ipairs(clients) do
    health.ok(('attached (client %d), root %s, position encoding %s'):format(
      client.id, client.root_dir or '(none)', client.offset_encoding))
    local response = client:request_sync('fettle/stats', vim.empty_dict(), 5000)
    if not response or response.err then
      health.warn('fettle/stats did not answer: ' .. vim.inspect(response and response.err))
    else
      local result = response.result or {}
      for _, model in ipairs(result.models or {}) do
        local line = ('model %s (%s): %s'):format(model.model, model.base_url, model.state)
        if model.state == 'ok' then
          health.ok(line)
        else
          health.warn(line .. ((model.reason and (': ' .. model.reason)) or ''))
        end
      end
      if #(result.models or {}) == 0 then
        health.info('no model has been used yet (its health shows after the first request)')
      end
      local edit = result.edit or {}
      health.info(('rewrites: %d requested, %d applied'):format(edit.requested or 0, edit.applied or 0))
    end
  end
  health.info('ghost text: not drawn by this plugin yet (Neovim 0.11 has no inline completion)')
end

return M

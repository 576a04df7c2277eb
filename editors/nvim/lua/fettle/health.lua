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
        -- An embedded model has no URL: its name says enough.
        local where = model.base_url and (' (' .. model.base_url .. ')') or ''
        local line = ('model %s%s: %s'):format(model.model, where, model.state)
        if model.state == 'ok' then
          health.ok(line)
        else
          health.warn(line .. ((model.reason and (': ' .. model.reason)) or ''))
        end
      end
      if #(result.models or {}) == 0 then
        health.info('no model has reported its health yet (a remote model does after its first request; fettle doctor below probes each)')
      end
      local edit = result.edit or {}
      health.info(('rewrites: %d requested, %d applied'):format(edit.requested or 0, edit.applied or 0))
    end
  end
  M.ghost_text(health)
  M.doctor(health, binary, clients[1].root_dir)
end

--- Which renderer draws ghost text, and whether it is on.
function M.ghost_text(health)
  health.start('fettle: ghost text')
  local fettle = require('fettle')
  local ghost = require('fettle.ghost')
  local mode = fettle.native_ghost_text() and "Neovim's own (vim.lsp.inline_completion)"
    or "the plugin's renderer (Neovim 0.11 has no inline completion)"
  if ghost.config.enabled then
    health.ok(('on: %s, debounce %d ms'):format(mode, ghost.config.debounce_ms))
  else
    health.warn(('off (:Fettle toggle turns it on): %s'):format(mode))
  end
  local c = ghost.counters
  health.info(('this session: %d requested, %d drawn, %d dropped as stale, %d cancelled'):format(
    c.requested, c.drawn, c.stale, c.cancelled))
  if #ghost.latencies > 0 then
    local sorted = vim.deepcopy(ghost.latencies)
    table.sort(sorted)
    local function at(q)
      return sorted[math.max(1, math.ceil(q * #sorted))]
    end
    health.info(('request → on screen: p50 %.0f ms, p90 %.0f ms (last %d)'):format(at(0.5), at(0.9), #sorted))
  end
  local keys = {}
  for name, lhs in pairs(fettle.options.ghost_text.keymaps or {}) do
    if lhs then
      table.insert(keys, ('%s %s'):format(name, lhs))
    end
  end
  table.sort(keys)
  health.info('keys (insert mode): ' .. table.concat(keys, ', '))
end

--- Whether each model a feature uses answers: `fettle doctor --only-used`
--- (one short round trip per model; an unused embedded model is not
--- loaded — that froze `:checkhealth` for 10–25 s). It reads the
--- workspace's and the user's configuration files, not the settings
--- given to setup().
function M.doctor(health, binary, root)
  health.start('fettle: models (fettle doctor --only-used)')
  local run = vim.system({ binary, 'doctor', '--only-used', root or vim.fn.getcwd() }, { text = true })
    :wait(120000)
  if run.code ~= 0 then
    health.error(('fettle doctor failed (exit %s): %s'):format(tostring(run.code), vim.trim(run.stderr or '')))
    return
  end
  local in_models, model = false, nil
  for _, line in ipairs(vim.split(run.stdout or '', '\n', { plain = true })) do
    if line == 'models:' then
      in_models = true
    elseif in_models and line == '' then
      break
    elseif in_models and line:match('^  %S') then
      model = vim.trim(line)
      health.info(model)
    elseif in_models and line:match('^    ok: ') then
      health.ok((line:gsub('^    ok: ', '')))
    elseif in_models and line:match('^    FAILED: ') then
      health.error(line:gsub('^    FAILED: ', ''), { 'see docs/models.md; `fettle doctor` shows the whole configuration' })
    elseif in_models then
      health.info(vim.trim(line))
    end
  end
  if not model then
    health.warn('fettle doctor listed no model')
  end
end

return M

// The requests the extension sends, against the real `fettle` binary and
// the mock model (`fettle mock-model`, 127.0.0.1), over vscode-jsonrpc:
// initialize with vscode-languageclient's capabilities and the settings
// the extension forwards, inline completion and its accept command, the
// code actions of the lightbulb and the rewrite preset picker, a rewrite,
// a chat task with progress and task events, undo, fix, cancel, stats.
// FETTLE_BIN names the binary (default: the debug build of this repo).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';

import vscodeCapabilities from './client-capabilities.json';
import { fettleCapabilities } from '../src/extension';
import { chatArguments, fixArguments, rewriteArguments, taskArguments } from '../src/commands';
import { serverSettings } from '../src/settings';

const BIN = process.env.FETTLE_BIN ?? path.resolve(__dirname, '../../../../target/debug/fettle');
const SHOP = 'import os\n\n\ndef total(items):\n    return 0\n\n\ndef describe(item):\n    return str(item)\n';

let mock: ChildProcess;
let server: ChildProcess;
let connection: MessageConnection;
let root: string;
let uri: string;
let text = SHOP;
let version = 1;
const events: { kind: string; text: string }[] = [];
const progress: unknown[] = [];
const stderr: string[] = [];
const saveRequests: { uris: string[] }[] = [];
/** What the client announces: vscode-languageclient's capabilities plus the extension's own. */
const capabilities = structuredClone(vscodeCapabilities) as Record<string, unknown>;
fettleCapabilities.fillClientCapabilities(capabilities as never);

function startMock(script: object): Promise<{ process: ChildProcess; url: string }> {
  const file = path.join(root, '..', 'script.json');
  writeFileSync(file, JSON.stringify(script));
  const child = spawn(BIN, ['mock-model', '--script', file, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const found = /listening on (\S+)/.exec(out);
      if (found) {
        resolve({ process: child, url: found[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`mock-model exited with ${code}`)));
  });
}

/** Applies a WorkspaceEdit to the open document, as VS Code would, and tells the server. */
function applyEdit(edit: { changes?: Record<string, TextEdit[]>; documentChanges?: { textDocument: { uri: string }; edits: TextEdit[] }[] }): boolean {
  const groups = edit.documentChanges?.map((c) => [c.textDocument.uri, c.edits] as const) ?? Object.entries(edit.changes ?? {});
  for (const [target, edits] of groups) {
    if (target !== uri) {
      return false;
    }
    const offsets = edits
      .map((e) => ({ start: offsetOf(e.range.start), end: offsetOf(e.range.end), newText: e.newText }))
      .sort((a, b) => b.start - a.start);
    for (const e of offsets) {
      text = text.slice(0, e.start) + e.newText + text.slice(e.end);
    }
    version += 1;
    connection.sendNotification('textDocument/didChange', {
      textDocument: { uri, version },
      contentChanges: [{ text }],
    });
  }
  return true;
}

interface TextEdit {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  newText: string;
}

function offsetOf(p: { line: number; character: number }): number {
  const lines = text.split('\n');
  let offset = 0;
  for (let i = 0; i < p.line && i < lines.length; i++) {
    offset += lines[i].length + 1;
  }
  return offset + p.character; // ASCII fixture: UTF-16 units are bytes
}

before(async () => {
  root = realpathSync(mkdtempSync(path.join(tmpdir(), 'fettle-vscode-')));
  root = path.join(root, 'ws');
  mkdirSync(root);
  writeFileSync(path.join(root, 'shop.py'), SHOP);
  uri = pathToFileURL(path.join(root, 'shop.py')).toString();
  const started = await startMock({
    responses: [
      { when: { path: '/v1/completions' }, text: 'item.name', repeat: true },
      { when: { path: '/v1/chat/completions', contains: '"tools"' }, tool_calls: [{ name: 'edit', arguments: { path: 'shop.py', search: '    return 0\n', replace: '    return sum(items)\n' } }] },
      { when: { path: '/v1/chat/completions', contains: '"tools"' }, text: 'total() now sums the items.', repeat: true },
      { when: { path: '/v1/chat/completions' }, text: '```python\ndef total(items):\n    """The sum of the items."""\n    return 0\n```', repeat: true },
    ],
  });
  mock = started.process;
  server = spawn(BIN, [], { cwd: root, env: { ...process.env, FETTLE_LOG: 'info', HOME: root, XDG_CONFIG_HOME: path.join(root, '.config') } });
  server.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  connection = createMessageConnection(new StreamMessageReader(server.stdout!), new StreamMessageWriter(server.stdin!));
  // What the extension forwards: only what the user set.
  const user: Record<string, unknown> = {
    'models': { mock: { provider: 'openai', base_url: `${started.url}/v1`, model: 'starcoder2-3b', fim_template: 'starcoder', max_retries: 0 } },
    'completion.model': 'mock',
    'completion.multiline': 'never',
    'edit.model': 'mock',
    'agent.model': 'mock',
    'agent.test_command': 'true',
    'server.path': BIN,
  };
  const settings = serverSettings(Object.keys(user).concat(['completion.enabled']), (k) => (k in user ? { globalValue: user[k] } : undefined));
  assert.equal((settings as { server?: unknown }).server, undefined, 'client-only settings stay in VS Code');
  connection.onRequest('workspace/configuration', (params: { items: { section?: string }[] }) =>
    params.items.map((item) => (item.section === 'fettle' ? settings : null)),
  );
  connection.onRequest('window/workDoneProgress/create', () => null);
  connection.onRequest('client/registerCapability', () => null);
  connection.onRequest('workspace/applyEdit', (params: { edit: Parameters<typeof applyEdit>[0] }) => ({ applied: applyEdit(params.edit) }));
  connection.onRequest('window/showMessageRequest', () => null);
  // The extension saves the buffer the server names (vscode's document.save()).
  connection.onRequest('fettle/saveDocuments', (params: { uris: string[] }) => {
    saveRequests.push(params);
    writeFileSync(path.join(root, 'shop.py'), text);
    return { saved: params.uris, failed: [] };
  });
  connection.onNotification('fettle/taskEvent', (e: { kind: string; text: string }) => {
    events.push(e);
  });
  connection.onNotification('$/progress', (p: unknown) => {
    progress.push(p);
  });
  connection.listen();
  const init = (await connection.sendRequest('initialize', {
    processId: process.pid,
    clientInfo: { name: 'Visual Studio Code', version: '1.91.0' },
    rootUri: pathToFileURL(root).toString(),
    workspaceFolders: [{ uri: pathToFileURL(root).toString(), name: 'ws' }],
    capabilities,
    initializationOptions: settings,
  })) as { capabilities: Record<string, unknown> };
  assert.ok(init.capabilities.inlineCompletionProvider, JSON.stringify(init.capabilities));
  assert.ok(init.capabilities.codeActionProvider);
  await connection.sendNotification('initialized', {});
  await connection.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version, text } });
});

after(async () => {
  try {
    await connection.sendRequest('shutdown');
    await connection.sendNotification('exit');
  } finally {
    mock?.kill();
    setTimeout(() => server?.kill(), 2000).unref();
  }
});

/** Replaces the document's text, as VS Code's (full) didChange would. */
function change(next: string): void {
  text = next;
  version += 1;
  connection.sendNotification('textDocument/didChange', { textDocument: { uri, version }, contentChanges: [{ text }] });
}

/** Saves the buffer, as VS Code would before a task. */
function save(): void {
  writeFileSync(path.join(root, 'shop.py'), text);
  connection.sendNotification('textDocument/didSave', { textDocument: { uri } });
}

test('ghost text: an inline completion, and its accept command reaches the server', async () => {
  change(`${SHOP}    label = `);
  const list = (await connection.sendRequest('textDocument/inlineCompletion', {
    textDocument: { uri },
    position: { line: 9, character: 12 },
    context: { triggerKind: 2 },
  })) as { items: { insertText: string; command: { command: string; arguments: unknown[] } }[] };
  assert.equal(list.items[0].insertText, 'item.name', JSON.stringify(list));
  const accept = list.items[0].command;
  assert.equal(accept.command, 'fettle.acceptCompletion');
  // VS Code runs the item's command on accept (the client proxies it).
  await connection.sendRequest('workspace/executeCommand', { command: accept.command, arguments: accept.arguments });
  const stats = (await connection.sendRequest('fettle/stats', {})) as {
    accepted: number;
    shown: number;
    models: { model: string; state: string }[];
  };
  // The status bar finds its model's health by `model` (the configured name).
  assert.deepEqual(
    stats.models.map((m) => [m.model, m.state]),
    [['mock', 'ok']],
    JSON.stringify(stats.models),
  );
  assert.equal(stats.accepted, 1, JSON.stringify(stats));
  change(SHOP);
});

test('the lightbulb lists rewrites of a selection; a preset carries its instruction', async () => {
  const selection = { start: { line: 3, character: 0 }, end: { line: 4, character: 12 } };
  const actions = (await connection.sendRequest('textDocument/codeAction', {
    textDocument: { uri },
    range: selection,
    context: { diagnostics: [], only: ['refactor.rewrite'], triggerKind: 1 },
  })) as { title: string; command: { command: string; arguments: { instruction?: string }[] } }[];
  const titles = actions.map((a) => a.title);
  assert.ok(titles.includes('Fettle: Rewrite…'), titles.join(', '));
  assert.ok(actions.some((a) => a.command.command === 'fettle.rewrite' && typeof a.command.arguments[0].instruction === 'string'), titles.join(', '));
  // VS Code's automatic lightbulb request gets nothing by default.
  const automatic = await connection.sendRequest('textDocument/codeAction', {
    textDocument: { uri },
    range: selection,
    context: { diagnostics: [], triggerKind: 2 },
  });
  assert.equal(automatic, null);
});

test('Rewrite Selection…: the edit arrives by workspace/applyEdit', async () => {
  const range = { start: { line: 3, character: 0 }, end: { line: 4, character: 12 } };
  const result = (await connection.sendRequest('workspace/executeCommand', {
    command: 'fettle.rewrite',
    arguments: rewriteArguments(uri, range, version, 'Add a docstring'),
    workDoneToken: 'fettle-vscode-1',
  })) as { applied: boolean; summary: string };
  assert.equal(result.applied, true, JSON.stringify(result));
  assert.match(text, /"""The sum of the items\."""/);
});

test('Chat…: a task with progress and task events; Show Diff has a diff; Undo restores', async () => {
  save();
  const result = (await connection.sendRequest('workspace/executeCommand', {
    command: 'fettle.chat',
    arguments: chatArguments('Make total() sum the items', uri, undefined),
    workDoneToken: 'fettle-vscode-2',
  })) as { taskId: string; status: string; changedFiles: string[]; diff: string; editorNotes?: unknown[] };
  assert.equal(result.status, 'success', JSON.stringify(result) + stderr.join(''));
  assert.deepEqual(result.changedFiles, [uri]);
  // The edited buffer was saved by the editor: no "save it yourself" note.
  assert.ok(saveRequests.some((r) => r.uris.includes(uri)), JSON.stringify(saveRequests));
  assert.deepEqual(result.editorNotes ?? [], [], JSON.stringify(result.editorNotes));
  assert.match(result.diff, /\+    return sum\(items\)/);
  assert.ok(events.some((e) => e.kind === 'tool_call'), JSON.stringify(events));
  assert.ok(progress.some((p) => (p as { token: string }).token === 'fettle-vscode-2'), 'progress on the command token');
  assert.match(text, /return sum\(items\)/);
  const undone = (await connection.sendRequest('workspace/executeCommand', {
    command: 'fettle.undo',
    arguments: taskArguments(result.taskId),
  })) as { restored: string[] };
  assert.deepEqual(undone.restored, [uri], JSON.stringify(undone));
  assert.match(readFileSync(path.join(root, 'shop.py'), 'utf8') + text, /return 0/);
});

test('Fix Diagnostics in This File and Cancel Task answer', async () => {
  const fixed = (await connection.sendRequest('workspace/executeCommand', {
    command: 'fettle.fixDiagnostics',
    arguments: fixArguments(uri),
  })) as { status: string };
  assert.ok(['success', 'gave_up', 'failed'].includes(fixed.status), JSON.stringify(fixed));
  const cancelled = await connection.sendRequest('workspace/executeCommand', {
    command: 'fettle.cancel',
    arguments: taskArguments(undefined),
  });
  assert.equal(cancelled, null);
});

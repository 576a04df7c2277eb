// The extension's glue with `vscode` mocked (test/vscode-mock.cjs) and a
// fake language client: what each command sends to the server, the
// settings it forwards, the status bar from fettle/stats, the diff shown.
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const vscode = require('vscode') as {
  calls: { api: string; args: unknown[] }[];
  answers: { inputBox: (string | undefined)[]; quickPick: ((items: unknown[]) => unknown)[]; message: (string | undefined)[] };
  settings: Record<string, unknown>;
  editorState: { activeTextEditor: unknown };
  statusBar: { text: string; tooltip: string; command: string; visible: boolean };
  files: Record<string, string>;
  workspace: { workspaceFolders: unknown };
  Uri: { file(path: string): unknown };
};
import { Fettle, type Client } from '../src/extension';

interface Sent {
  method: string;
  params: unknown;
}

function fakeClient(answers: Record<string, (params: unknown) => unknown>, sent: Sent[]): Client {
  const client = {
    state: 2,
    start: async () => undefined,
    stop: async () => undefined,
    isRunning: () => true,
    sendRequest: async (type: string | { method: string }, params: unknown) => {
      const method = typeof type === 'string' ? type : type.method;
      sent.push({ method, params });
      const answer = answers[method === 'workspace/executeCommand' ? (params as { command: string }).command : method];
      return answer ? answer(params) : null;
    },
    sendNotification: async (type: string | { method: string }, params: unknown) => {
      sent.push({ method: typeof type === 'string' ? type : type.method, params });
    },
    onNotification: () => ({ dispose: () => undefined }),
    onProgress: () => ({ dispose: () => undefined }),
    onDidChangeState: () => ({ dispose: () => undefined }),
  };
  return client as unknown as Client;
}

const context = { subscriptions: [] as unknown[], extensionPath: '/nonexistent' };
const editor = {
  document: { uri: { toString: () => 'file:///ws/shop.py' }, version: 4 },
  selection: { start: { line: 2, character: 0 }, end: { line: 5, character: 3 } },
};
const KEYS = ['server.path', 'completion.enabled', 'completion.model', 'models', 'agent.model'];

async function started(answers: Record<string, (params: unknown) => unknown>, sent: Sent[]): Promise<Fettle> {
  vscode.settings['server.path'] = process.execPath; // any executable: the client is fake
  const output = { appendLine: () => undefined, show: () => undefined };
  const fettle = new Fettle(
    context as never,
    output as never,
    output as never,
    KEYS,
    (server, options) => {
      sent.push({ method: '(start)', params: { server, initializationOptions: options.initializationOptions } });
      return fakeClient(answers, sent);
    },
  );
  await fettle.start();
  return fettle;
}

beforeEach(() => {
  vscode.calls.length = 0;
  for (const key of Object.keys(vscode.settings)) {
    delete vscode.settings[key];
  }
  vscode.editorState.activeTextEditor = editor;
});

test('the server starts from the configured path with only the settings the user set', async () => {
  const sent: Sent[] = [];
  vscode.settings['completion.model'] = 'coder';
  vscode.settings['models'] = { coder: { provider: 'ollama', model: 'qwen2.5-coder:7b' } };
  await started({}, sent);
  const start = sent[0].params as { server: { command: string }; initializationOptions: unknown };
  assert.equal(start.server.command, process.execPath);
  assert.deepEqual(start.initializationOptions, {
    completion: { model: 'coder' },
    models: { coder: { provider: 'ollama', model: 'qwen2.5-coder:7b' } },
  });
});

test('Chat… sends fettle.chat with the file and selection, with progress and a workDoneToken', async () => {
  const sent: Sent[] = [];
  const fettle = await started(
    { 'fettle.chat': () => ({ taskId: 't1', status: 'success', summary: 'Done.', changedFiles: ['file:///ws/shop.py'], diff: '' }) },
    sent,
  );
  vscode.answers.inputBox.push('make the tests pass');
  await fettle.chat();
  const chat = sent.find((s) => (s.params as { command?: string }).command === 'fettle.chat');
  assert.deepEqual(chat?.params, {
    command: 'fettle.chat',
    arguments: [{ message: 'make the tests pass', uri: 'file:///ws/shop.py', range: editor.selection }],
    workDoneToken: 'fettle-vscode-1',
  });
  assert.ok(vscode.calls.some((c) => c.api === 'withProgress' && (c.args[0] as { cancellable: boolean }).cancellable));
  const shown = vscode.calls.find((c) => c.api === 'showInformationMessage');
  assert.deepEqual(shown?.args, ['Fettle: success — Done. (1 file changed)', 'Show Diff', 'Undo', 'Task Log']);
});

test('Rewrite Selection… offers the server presets, then sends fettle.rewrite', async () => {
  const sent: Sent[] = [];
  const presets = [
    { title: 'Fettle: Rewrite…', command: { command: 'fettle.rewrite', arguments: [{ uri: 'u' }] } },
    { title: 'Fettle: Add documentation', command: { command: 'fettle.rewrite', arguments: [{ uri: 'u', instruction: 'Add docs' }] } },
  ];
  const fettle = await started(
    { 'textDocument/codeAction': () => presets, 'fettle.rewrite': () => ({ applied: true, summary: 'rewrote 4 lines' }) },
    sent,
  );
  vscode.answers.quickPick.push((items) => (items as { label: string }[]).find((i) => i.label === 'Add documentation'));
  await fettle.rewriteSelection();
  const pick = vscode.calls.find((c) => c.api === 'showQuickPick');
  assert.deepEqual((pick?.args[0] as { label: string }[]).map((i) => i.label), ['$(edit) Type an instruction…', 'Add documentation']);
  const rewrite = sent.find((s) => (s.params as { command?: string }).command === 'fettle.rewrite');
  assert.deepEqual((rewrite?.params as { arguments: unknown[] }).arguments, [
    { uri: 'file:///ws/shop.py', range: editor.selection, version: 4, instruction: 'Add docs' },
  ]);
});

test('Fix, Undo and Cancel send their commands; an empty chat sends nothing', async () => {
  const sent: Sent[] = [];
  const fettle = await started(
    {
      'fettle.fixDiagnostics': () => ({ taskId: 't2', status: 'gave_up', summary: 'No.', changedFiles: [] }),
      'fettle.undo': () => ({ restored: ['file:///ws/shop.py'], skipped: [] }),
    },
    sent,
  );
  await fettle.fixFile();
  await fettle.undo();
  await fettle.cancel();
  vscode.answers.inputBox.push(undefined);
  await fettle.chat();
  const commands = sent
    .filter((s) => s.method === 'workspace/executeCommand')
    .map((s) => [(s.params as { command: string }).command, (s.params as { arguments: unknown[] }).arguments]);
  assert.deepEqual(commands, [
    ['fettle.fixDiagnostics', [{ uri: 'file:///ws/shop.py' }]],
    ['fettle.undo', [{ taskId: 't2' }]],
    ['fettle.cancel', [{}]],
  ]);
});

test('the status bar shows the model and toggles ghost text in user settings', async () => {
  const sent: Sent[] = [];
  vscode.settings['completion.model'] = 'local';
  const fettle = await started({ 'fettle/stats': () => ({ shown: 4, accepted: 1, acceptanceRate: 0.25, models: [] }) }, sent);
  await fettle.fixFile(); // refreshes the statistics when done
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(vscode.statusBar.command, 'fettle.vscode.toggleGhostText');
  assert.match(vscode.statusBar.text, /Fettle: local · 25% accepted/);
  await fettle.toggleGhostText();
  assert.deepEqual(vscode.calls.find((c) => c.api === 'configuration.update')?.args, ['completion.enabled', false, 1]);
  await fettle.stop();
});

test('Show Diff opens VS Code\'s diff editor: the file before the task against the file now', async () => {
  const sent: Sent[] = [];
  const diff = 'diff --git a/shop.py b/shop.py\n--- a/shop.py\n+++ b/shop.py\n@@ -1,2 +1,2 @@\n def total(items):\n-    return 0\n+    return sum(items)\n';
  const fettle = await started(
    { 'fettle.chat': () => ({ taskId: 't3', status: 'success', summary: 'Summed.', changedFiles: ['file:///ws/shop.py'], diff }) },
    sent,
  );
  vscode.workspace.workspaceFolders = [{ uri: vscode.Uri.file('/ws') }];
  vscode.files['/ws/shop.py'] = 'def total(items):\n    return sum(items)\n';
  vscode.answers.inputBox.push('sum them');
  vscode.answers.message.push('Show Diff');
  await fettle.chat();
  const shown = vscode.calls.find((c) => c.api === 'executeCommand' && c.args[0] === 'vscode.diff');
  assert.ok(shown, JSON.stringify(vscode.calls.map((c) => c.api)));
  const [, before, after, title] = shown.args as [string, { toString(): string }, { toString(): string }, string];
  assert.equal(after.toString(), 'file:///ws/shop.py');
  assert.equal(title, 'shop.py (Fettle task t3)');
  // What the diff editor's left side reads, from the content provider.
  const provider = vscode.calls.find((c) => c.api === 'registerTextDocumentContentProvider')?.args[1] as {
    provideTextDocumentContent(uri: unknown): string;
  };
  assert.equal(provider.provideTextDocumentContent(before), 'def total(items):\n    return 0\n');
  vscode.workspace.workspaceFolders = undefined;
});

test('a settings change is sent to the running server; Restart stops and starts it again', async () => {
  const sent: Sent[] = [];
  const fettle = await started({}, sent);
  vscode.settings['completion.model'] = 'coder';
  fettle.onConfigurationChanged({ affectsConfiguration: (section: string) => section === 'fettle' } as never);
  const change = sent.find((s) => s.method === 'workspace/didChangeConfiguration');
  assert.deepEqual(change?.params, { settings: { fettle: { completion: { model: 'coder' } } } });
  const starts = () => sent.filter((s) => s.method === '(start)').length;
  assert.equal(starts(), 1);
  await fettle.restart();
  assert.equal(starts(), 2);
  await fettle.stop();
});

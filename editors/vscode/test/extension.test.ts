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
  listeners: { selection: ((event: unknown) => void)[]; activeEditor: ((editor: unknown) => void)[] };
  documents: { uri: { toString(): string }; save(): Promise<boolean> }[];
};
import { Fettle, fettleCapabilities, type Client } from '../src/extension';

interface Sent {
  method: string;
  params: unknown;
}

/** What the fake client was given besides messages. */
const registered = {
  requestHandlers: new Map<string, (params: unknown) => unknown>(),
  notificationHandlers: new Map<string, (params: unknown) => void>(),
  features: [] as unknown[],
  stops: 0,
};

function fakeClient(answers: Record<string, (params: unknown) => unknown>, sent: Sent[], running = true): Client {
  const client = {
    state: running ? 2 : 1,
    start: async () => undefined,
    stop: async () => {
      registered.stops += 1;
    },
    isRunning: () => running,
    onRequest: (type: string | { method: string }, handler: (params: unknown) => unknown) => {
      registered.requestHandlers.set(typeof type === 'string' ? type : type.method, handler);
      return { dispose: () => undefined };
    },
    registerFeature: (feature: unknown) => registered.features.push(feature),
    sendRequest: async (type: string | { method: string }, params: unknown) => {
      const method = typeof type === 'string' ? type : type.method;
      sent.push({ method, params });
      const answer = answers[method === 'workspace/executeCommand' ? (params as { command: string }).command : method];
      return answer ? answer(params) : null;
    },
    sendNotification: async (type: string | { method: string }, params: unknown) => {
      sent.push({ method: typeof type === 'string' ? type : type.method, params });
    },
    onNotification: (type: string | { method: string }, handler: (params: unknown) => void) => {
      registered.notificationHandlers.set(typeof type === 'string' ? type : type.method, handler);
      return { dispose: () => undefined };
    },
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

const output = { appendLine: () => undefined, show: () => undefined, error: () => undefined, warn: () => undefined };

async function started(
  answers: Record<string, (params: unknown) => unknown>,
  sent: Sent[],
  running = true,
): Promise<Fettle> {
  vscode.settings['server.path'] = process.execPath; // any executable: the client is fake
  const fettle = new Fettle(
    context as never,
    output as never,
    output as never,
    KEYS,
    (server, options) => {
      sent.push({ method: '(start)', params: { server, initializationOptions: options.initializationOptions, options } });
      return fakeClient(answers, sent, running);
    },
  );
  await fettle.start();
  return fettle;
}

beforeEach(() => {
  vscode.calls.length = 0;
  registered.requestHandlers.clear();
  registered.notificationHandlers.clear();
  registered.features.length = 0;
  registered.stops = 0;
  vscode.documents.length = 0;
  vscode.listeners.selection.length = 0;
  vscode.listeners.activeEditor.length = 0;
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

test('Chat… keeps a conversation in Fettle Chat: text streams in, a follow-up continues, /new starts afresh', async () => {
  const sent: Sent[] = [];
  let n = 0;
  const fettle = await started(
    {
      'fettle.chat': () => {
        n += 1;
        const event = registered.notificationHandlers.get('fettle/taskEvent');
        assert.ok(event);
        event({ taskId: 'other', kind: 'text', text: 'not this chat' });
        event({ taskId: `t${n}`, kind: 'status', text: 'Started: the request' });
        event({ taskId: `t${n}`, kind: 'status', text: 'Suspects, most likely first:\ntotal (shop.py:1): named' });
        event({ taskId: `t${n}`, kind: 'text', text: 'Fix' });
        event({ taskId: `t${n}`, kind: 'text', text: 'ed.' });
        event({ taskId: `t${n}`, kind: 'tool_call', text: 'edit shop.py\nits arguments' });
        return { taskId: `t${n}`, status: 'success', summary: 'Done.', changedFiles: [], diff: '', conversation: { turns: n === 3 ? 1 : n } };
      },
    },
    sent,
  );
  vscode.answers.inputBox.push('make the tests pass', 'now the empty list', '/new something else');
  await fettle.chat();
  await fettle.chat();
  await fettle.chat();
  const chats = sent
    .filter((s) => (s.params as { command?: string }).command === 'fettle.chat')
    .map((s) => (s.params as { arguments: { message: string; continue?: boolean }[] }).arguments[0]);
  assert.deepEqual(
    chats.map((a) => [a.message, a.continue]),
    [['make the tests pass', undefined], ['now the empty list', true], ['something else', undefined]],
  );
  const prompts = vscode.calls
    .filter((c) => c.api === 'showInputBox')
    .map((c) => (c.args[0] as { prompt: string }).prompt);
  assert.ok(prompts[1].includes('follow-up') && prompts[1].includes('/new'), prompts[1]);
  const shown = vscode.calls
    .filter((c) => c.api.endsWith(':Fettle Chat'))
    .map((c) => (c.api.startsWith('output.append:') ? `+${String(c.args[0])}` : String(c.args[0])));
  const second = shown.indexOf('\nYou: now the empty list\n\nFettle:');
  assert.ok(second > 0, JSON.stringify(shown));
  assert.deepEqual(shown.slice(second + 1, second + 9), [
    '  · Started: the request',
    '  · Suspects, most likely first:',
    '    total (shop.py:1): named',
    '+Fix',
    '+ed.',
    '',
    '  · edit shop.py',
    '\n[success]\nDone.',
  ]);
  assert.ok(shown.includes('\n--- new conversation ---'), JSON.stringify(shown));
  assert.ok(!shown.some((l) => l.includes('not this chat')), JSON.stringify(shown));
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
    // The fix changed nothing: undo is the server's latest task that did.
    ['fettle.undo', [{}]],
    ['fettle.cancel', [{}]],
  ]);
});

test('Undo of a task already undone says nothing is restored, not "restored 0 file(s)"', async () => {
  const sent: Sent[] = [];
  const fettle = await started(
    { 'fettle.undo': () => ({ restored: [], unchanged: ['file:///ws/shop.py'], skipped: [] }) },
    sent,
  );
  await fettle.undo();
  const shown = vscode.calls.find((c) => c.api === 'showInformationMessage');
  assert.deepEqual(shown?.args, ['Fettle: nothing to restore (already as before the task)']);
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
  // Back on: the `false` is removed (on is the default), not overwritten with `true`.
  await fettle.toggleGhostText();
  const updates = vscode.calls.filter((c) => c.api === 'configuration.update').map((c) => c.args);
  assert.deepEqual(updates[1], ['completion.enabled', undefined, 1]);
  assert.equal('completion.enabled' in vscode.settings, false);
  await fettle.stop();
});

test('the client never sends the whole settings section: the didChangeConfiguration middleware swallows it', async () => {
  const sent: Sent[] = [];
  await started({}, sent);
  const options = (sent[0].params as { options: { middleware: { workspace: { didChangeConfiguration(sections: unknown, next: () => Promise<void>): Promise<void> } } } }).options;
  let forwarded = false;
  await options.middleware.workspace.didChangeConfiguration(['fettle'], async () => {
    forwarded = true;
  });
  assert.equal(forwarded, false, 'the unfiltered section (defaults, extension-only keys) would override fettle.toml');
});

test('Fettle announces saveDocuments and saves the open documents the server names', async () => {
  const sent: Sent[] = [];
  await started({}, sent);
  assert.deepEqual(registered.features, [fettleCapabilities]);
  const capabilities: { experimental?: unknown } = {};
  fettleCapabilities.fillClientCapabilities(capabilities as never);
  assert.deepEqual(capabilities.experimental, { fettle: { saveDocuments: true } });
  let saves = 0;
  vscode.documents.push(
    { uri: { toString: () => 'file:///ws/shop.py' }, save: async () => ++saves > 0 },
    { uri: { toString: () => 'file:///ws/readonly.py' }, save: async () => false },
  );
  const save = registered.requestHandlers.get('fettle/saveDocuments');
  const result = await save?.({ uris: ['file:///ws/shop.py', 'file:///ws/readonly.py', 'file:///ws/closed.py'] });
  assert.deepEqual(result, {
    saved: ['file:///ws/shop.py'],
    failed: [
      { uri: 'file:///ws/readonly.py', message: 'VS Code did not save it' },
      { uri: 'file:///ws/closed.py', message: 'not open in VS Code' },
    ],
  });
  assert.equal(saves, 1);
});

test("the server's questions are modal dialogs; the answer goes back", async () => {
  const sent: Sent[] = [];
  await started({}, sent);
  const ask = registered.requestHandlers.get('window/showMessageRequest');
  assert.ok(ask, 'a handler replaces the client\'s toast');
  vscode.answers.message.push('Save and continue');
  const answer = await ask({
    type: 2,
    message: 'shop.py has unsaved changes; save them first?',
    actions: [{ title: 'Save and continue' }, { title: 'Leave this file alone' }],
  });
  assert.deepEqual(answer, { title: 'Save and continue' });
  const shown = vscode.calls.find((c) => c.api === 'showWarningMessage');
  assert.deepEqual(shown?.args, [
    'shop.py has unsaved changes; save them first?',
    { modal: true },
    'Save and continue',
    'Leave this file alone',
  ]);
  vscode.answers.message.push(undefined); // Escape
  assert.equal(await ask({ type: 3, message: 'Run `make`?', actions: [{ title: 'Run' }] }), null);
});

test('where the cursor rests is reported (fettle/cursor) once it rests', async () => {
  const sent: Sent[] = [];
  await started({}, sent);
  const document = { uri: { scheme: 'file', toString: () => 'file:///ws/shop.py' }, languageId: 'python' };
  const moved = (line: number) =>
    vscode.listeners.selection.forEach((l) => l({ textEditor: { document, selection: { active: { line, character: 4 } } } }));
  moved(3);
  moved(7); // before the first rested: only the last is reported
  await new Promise((resolve) => setTimeout(resolve, 250));
  const reports = sent.filter((s) => s.method === 'fettle/cursor');
  assert.deepEqual(reports, [
    { method: 'fettle/cursor', params: { textDocument: { uri: 'file:///ws/shop.py' }, position: { line: 7, character: 4 } } },
  ]);
});

test('without a server binary the status bar says so and leads to the log', async () => {
  vscode.settings['server.path'] = '/nonexistent/fettle';
  const fettle = new Fettle(context as never, output as never, output as never, KEYS, () => {
    throw new Error('no client without a binary');
  });
  await fettle.start();
  assert.match(vscode.statusBar.text, /Fettle: not running/);
  assert.equal(vscode.statusBar.command, 'fettle.vscode.showLog');
  assert.ok(vscode.calls.some((c) => c.api === 'showErrorMessage'));
});

test('a client that failed to start is stopped too', async () => {
  const sent: Sent[] = [];
  const fettle = await started({}, sent, false);
  await fettle.stop();
  assert.equal(registered.stops, 1);
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

test('a follow-up that changed nothing leaves Show Diff and Undo on the change before it', async () => {
  const sent: Sent[] = [];
  const diff = 'diff --git a/shop.py b/shop.py\n--- a/shop.py\n+++ b/shop.py\n@@ -1,2 +1,2 @@\n def total(items):\n-    return 0\n+    return sum(items)\n';
  let n = 0;
  const fettle = await started(
    {
      'fettle.chat': () => {
        n += 1;
        return n === 1
          ? { taskId: 't5', status: 'success', summary: 'Summed.', changedFiles: ['file:///ws/shop.py'], diff, conversation: { turns: 1 } }
          : { taskId: 't6', status: 'success', summary: 'It sums them.', changedFiles: [], diff: '', conversation: { turns: 2 } };
      },
      'fettle.undo': () => ({ restored: ['file:///ws/shop.py'], skipped: [] }),
    },
    sent,
  );
  vscode.workspace.workspaceFolders = [{ uri: vscode.Uri.file('/ws') }];
  vscode.files['/ws/shop.py'] = 'def total(items):\n    return sum(items)\n';
  vscode.answers.inputBox.push('sum them', 'what did you change?');
  await fettle.chat();
  await fettle.chat();
  await fettle.showDiff();
  const shown = vscode.calls.find((c) => c.api === 'executeCommand' && c.args[0] === 'vscode.diff');
  assert.equal(shown?.args[3], 'shop.py (Fettle task t5)', JSON.stringify(vscode.calls.map((c) => c.api)));
  await fettle.undo();
  const undo = sent.find((s) => (s.params as { command?: string }).command === 'fettle.undo');
  assert.deepEqual((undo?.params as { arguments: unknown[] }).arguments, [{ taskId: 't5' }]);
  vscode.workspace.workspaceFolders = undefined;
});

test('fettle.server settings that arrive just after the start restart the server with them, unasked', async () => {
  const sent: Sent[] = [];
  const fettle = await started({}, sent);
  const starts = () => sent.filter((s) => s.method === '(start)');
  assert.equal(starts().length, 1);
  // A remote window's settings, loaded after activation.
  vscode.settings['server.path'] = process.execPath;
  vscode.settings['server.args'] = ['--late'];
  fettle.onConfigurationChanged({ affectsConfiguration: (section: string) => section.startsWith('fettle') } as never);
  for (let i = 0; i < 50 && starts().length < 2; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.equal(starts().length, 2);
  const server = (starts()[1].params as { server: { args: string[] } }).server;
  assert.deepEqual(server.args, ['--late']);
  assert.ok(!vscode.calls.some((c) => c.api === 'showInformationMessage'), 'not asked');
  await fettle.stop();
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

// The VS Code side of Fettle: starts the `fettle` language server and adds
// what VS Code needs around it. Ghost text is VS Code's own inline
// completion, fed by the client's built-in LSP 3.18 support; the server's
// code actions reach the lightbulb as they are. Here: finding the binary,
// forwarding settings, the status bar, commands with progress and Cancel,
// and the task log; the conversation is chat.ts, the task's diff in VS
// Code's diff editor diffview.ts.
import * as fs from 'fs';
import * as os from 'os';
import * as vscode from 'vscode';
import {
  CodeActionRequest,
  type ClientCapabilities,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  ShowMessageRequest,
  State,
  type StaticFeature,
  WorkDoneProgress,
  type WorkDoneProgressBegin,
  type WorkDoneProgressReport,
} from 'vscode-languageclient/node';

import { findServer } from './binary';
import { forwardLog } from './log';
import {
  chatArguments,
  chatMessage,
  fixArguments,
  rewriteArguments,
  taskArguments,
  taskMessage,
  type TaskResult,
} from './commands';
import { DiffView } from './diffview';
import { serverSettings } from './settings';
import { statusView, type Stats } from './status';
import { ChatView, type TaskEvent } from './chat';
import { askModal, errorMessage, instructionOf, isCancelled, toRange } from './ui';

export const LANGUAGES = [
  'rust', 'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
  'go', 'c', 'cpp', 'java', 'lua',
];

/** How long the cursor rests before its place is reported (`fettle/cursor`). */
const CURSOR_REST_MS = 150;

/** The part of `LanguageClient` the extension uses (a fake in the unit tests). */
export type Client = Pick<
  LanguageClient,
  | 'start'
  | 'stop'
  | 'state'
  | 'isRunning'
  | 'sendRequest'
  | 'sendNotification'
  | 'onNotification'
  | 'onRequest'
  | 'onProgress'
  | 'onDidChangeState'
  | 'registerFeature'
>;

/**
 * Fettle's own client capabilities: `experimental.fettle.saveDocuments`
 * (the server asks the editor to save the buffers an agent task changed,
 * so VS Code knows they are saved instead of keeping them dirty).
 */
export const fettleCapabilities: StaticFeature = {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    experimental.fettle = { saveDocuments: true };
    capabilities.experimental = experimental;
  },
  initialize(): void {},
  getState: () => ({ kind: 'static' }),
  clear(): void {},
};

export interface SaveResult {
  saved: string[];
  failed: { uri: string; message: string }[];
}

export type ClientFactory = (server: ServerOptions, options: LanguageClientOptions) => Client;

const realClient: ClientFactory = (server, options) => new LanguageClient('fettle', 'Fettle', server, options);

/**
 * Settings of `fettle.server` that change this soon after the extension
 * started are taken as late-loaded (a remote window), and the server is
 * restarted with them without asking.
 */
const LATE_SETTINGS_MS = 15_000;

export class Fettle {
  client: Client | undefined;
  private readonly status: vscode.StatusBarItem;
  private stats: Stats | undefined;
  private working = 0;
  private lastTask: TaskResult | undefined;
  private readonly diffView: DiffView;
  private poll: NodeJS.Timeout | undefined;
  private cursorTimer: NodeJS.Timeout | undefined;
  private progressTokens = 0;
  /** Why the server is not running, for the status bar. */
  private failure: string | undefined;
  /** When the extension was created: settings that change soon after are late, not the user's edit. */
  private readonly createdAt = Date.now();
  /** The conversation of Fettle: Chat (the "Fettle Chat" output). */
  private readonly chatView: ChatView;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
    private readonly tasks: vscode.OutputChannel,
    private readonly keys: string[],
    private readonly createClient: ClientFactory = realClient,
  ) {
    this.chatView = new ChatView(context.subscriptions);
    this.status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
    this.status.command = 'fettle.vscode.toggleGhostText';
    context.subscriptions.push(this.status);
    // Where the cursor rests: the embedded model prepares its prompt there.
    context.subscriptions.push(
      vscode.window.onDidChangeTextEditorSelection((event) => this.cursorMoved(event.textEditor)),
      vscode.window.onDidChangeActiveTextEditor((editor) => editor && this.cursorMoved(editor)),
    );
    this.diffView = new DiffView(context.subscriptions);
  }

  private config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration('fettle');
  }

  settings(): Record<string, unknown> {
    const config = this.config();
    return serverSettings(this.keys, (key) => config.inspect(key));
  }

  async start(): Promise<void> {
    const found = findServer(this.config().get<string>('server.path'), this.context.extensionPath, {
      isExecutable: (file) => {
        try {
          fs.accessSync(file, fs.constants.X_OK);
          return fs.statSync(file).isFile();
        } catch {
          return false;
        }
      },
      env: process.env,
      platform: process.platform,
      home: os.homedir(),
    });
    if ('error' in found) {
      // `fettle.server.path` is a machine setting: in a remote window
      // (SSH, WSL, containers, code-server) it lives in the Remote tab.
      const remote = vscode.env.remoteName
        ? ` This window is remote (${vscode.env.remoteName}): set fettle.server.path in the Remote tab of the settings, it names a file on that machine.`
        : '';
      const error = `${found.error}${remote}`;
      this.failure = error;
      this.output.error(error);
      this.render();
      void vscode.window.showErrorMessage(error, 'Open Settings').then((pick) => {
        if (pick) {
          void vscode.commands.executeCommand(
            vscode.env.remoteName ? 'workbench.action.openRemoteSettings' : 'workbench.action.openSettings',
            'fettle.server.path',
          );
        }
      });
      return;
    }
    this.failure = undefined;
    this.output.appendLine(
      `Starting ${found.path} (from ${found.source}; fettle.server.path: ${this.config().get<string>('server.path') || 'unset'})`,
    );
    const serverOptions: ServerOptions = {
      command: found.path,
      args: this.config().get<string[]>('server.args') ?? [],
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: LANGUAGES.flatMap((language) => [
        { language, scheme: 'file' },
        { language, scheme: 'untitled' },
      ]),
      outputChannel: this.output,
      // Each server log line at its own level (the default logs stderr as errors).
      stdioOptions: {
        stdout: (input, channel) => forwardLog(input, channel),
        stderr: (input, channel) => forwardLog(input, channel),
      },
      initializationOptions: this.settings(),
      middleware: {
        workspace: {
          // Only what the user set, only the server's keys.
          configuration: (params) =>
            params.items.map((item) => (item.section === 'fettle' ? this.settings() : null)),
          // The client would send the whole `fettle` section (every default
          // and the extension's own keys, overriding fettle.toml) when the
          // server registers for changes and on each change; the extension
          // sends the filtered settings itself (`onConfigurationChanged`).
          didChangeConfiguration: async () => undefined,
        },
      },
    };
    this.client = this.createClient(serverOptions, clientOptions);
    this.client.registerFeature(fettleCapabilities);
    this.client.onDidChangeState((event) => {
      if (event.newState === State.Running) {
        this.refreshStats();
      }
      this.render();
    });
    await this.client.start();
    this.client.onNotification('fettle/taskEvent', (event: TaskEvent) => this.logEvent(event));
    this.client.onRequest('fettle/saveDocuments', (params: { uris?: string[] }) => this.saveDocuments(params));
    // Fettle's questions (run this command? save this buffer first?) hold
    // up a task: a modal dialog, not a toast that hides itself. Registered
    // after start, so it replaces the client's own handler.
    this.client.onRequest(ShowMessageRequest.type, (params) => askModal(params));
    this.poll = setInterval(() => this.refreshStats(), 5000);
    this.poll.unref?.(); // never what keeps a process alive
    this.render();
  }

  async stop(): Promise<void> {
    if (this.poll) {
      clearInterval(this.poll);
      this.poll = undefined;
    }
    const client = this.client;
    this.client = undefined;
    // Whatever its state: a client that failed to start still holds its
    // connection (stop returns at once for one never started or stopped).
    if (client) {
      await client.stop().catch((error: unknown) => this.output.warn(`stopping the server: ${errorMessage(error)}`));
    }
  }

  /** `fettle/saveDocuments`: saves the open documents the server names. */
  async saveDocuments(params: { uris?: string[] }): Promise<SaveResult> {
    const result: SaveResult = { saved: [], failed: [] };
    for (const uri of params?.uris ?? []) {
      const wanted = vscode.Uri.parse(uri).toString();
      const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === wanted);
      if (!document) {
        result.failed.push({ uri, message: 'not open in VS Code' });
        continue;
      }
      try {
        if (await document.save()) {
          result.saved.push(uri);
        } else {
          result.failed.push({ uri, message: 'VS Code did not save it' });
        }
      } catch (error) {
        result.failed.push({ uri, message: errorMessage(error) });
      }
    }
    return result;
  }

  /** Reports where the cursor rests, once it has rested a moment. */
  private cursorMoved(editor: vscode.TextEditor): void {
    if (this.cursorTimer) {
      clearTimeout(this.cursorTimer);
    }
    const document = editor.document;
    if (document.uri.scheme !== 'file' || !LANGUAGES.includes(document.languageId)) {
      return;
    }
    this.cursorTimer = setTimeout(() => {
      this.cursorTimer = undefined;
      if (!this.client?.isRunning() || this.config().get<boolean>('completion.enabled') === false) {
        return;
      }
      const position = editor.selection.active;
      void this.client.sendNotification('fettle/cursor', {
        textDocument: { uri: document.uri.toString() },
        position: { line: position.line, character: position.character },
      });
    }, CURSOR_REST_MS);
    this.cursorTimer.unref?.();
  }

  onConfigurationChanged(event: vscode.ConfigurationChangeEvent): void {
    if (event.affectsConfiguration('fettle.server') && Date.now() - this.createdAt < LATE_SETTINGS_MS) {
      // A remote window (code-server, SSH) may load the settings after the
      // extension started the server with what it found then (fettle from
      // PATH): start it again with them, rather than ask or go on silently.
      this.output.appendLine(
        `fettle.server settings arrived after the server started (fettle.server.path: ${this.config().get<string>('server.path') || 'unset'}); restarting with them`,
      );
      void this.restart();
    } else if (event.affectsConfiguration('fettle.server')) {
      void vscode.window
        .showInformationMessage('Fettle: restart the server to use the new server settings?', 'Restart')
        .then((pick) => pick && this.restart());
    } else if (event.affectsConfiguration('fettle') && this.client?.isRunning()) {
      void this.client.sendNotification('workspace/didChangeConfiguration', {
        settings: { fettle: this.settings() },
      });
    }
    this.render();
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  private refreshStats(): void {
    if (!this.client?.isRunning()) {
      return;
    }
    this.client.sendRequest<Stats>('fettle/stats', {}).then(
      (stats) => {
        this.stats = stats;
        this.render();
      },
      () => undefined,
    );
  }

  private render(): void {
    if (this.config().get<boolean>('statusBar.enabled') === false) {
      this.status.hide();
      return;
    }
    const model = this.config().get<string>('completion.model') || 'local';
    const ghost = this.config().get<boolean>('completion.enabled') !== false;
    const view = statusView(model, this.stats, this.working > 0, ghost);
    if (this.client?.isRunning()) {
      this.status.text = view.text;
      this.status.tooltip = view.tooltip;
      this.status.command = 'fettle.vscode.toggleGhostText';
    } else {
      this.status.text = '$(circle-slash) Fettle: not running';
      this.status.tooltip = this.failure ?? 'The Fettle server is not running; click for its log.';
      this.status.command = 'fettle.vscode.showLog';
    }
    this.status.show();
  }

  async toggleGhostText(): Promise<void> {
    const config = this.config();
    if (config.get<boolean>('completion.enabled') !== false) {
      await config.update('completion.enabled', false, vscode.ConfigurationTarget.Global);
      return;
    }
    // On is the default: remove the `false`s rather than write `true`.
    const set = config.inspect<boolean>('completion.enabled');
    if (set?.workspaceValue !== undefined) {
      await config.update('completion.enabled', undefined, vscode.ConfigurationTarget.Workspace);
    }
    if (set?.globalValue !== undefined) {
      await config.update('completion.enabled', undefined, vscode.ConfigurationTarget.Global);
    }
  }

  private logEvent(event: TaskEvent): void {
    const text = event.text.length > 2000 ? `${event.text.slice(0, 2000)}…` : event.text;
    this.tasks.appendLine(`[${event.taskId}] ${event.kind}: ${text}`);
    this.chatView.event(event);
  }

  /** Runs a server command with a notification showing its progress, and Cancel. */
  async execute<T>(title: string, command: string, args: unknown[]): Promise<T | undefined> {
    const client = this.client;
    if (!client?.isRunning()) {
      void vscode.window.showErrorMessage('Fettle: the server is not running (see the Fettle output).');
      return undefined;
    }
    const token = `fettle-vscode-${++this.progressTokens}`;
    this.working += 1;
    this.render();
    try {
      return await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title, cancellable: true },
        async (progress, cancel) => {
          const listener = client.onProgress(WorkDoneProgress.type, token, (value) => {
            if (value.kind !== 'end') {
              const message = (value as WorkDoneProgressBegin | WorkDoneProgressReport).message;
              if (message) {
                progress.report({ message });
              }
            }
          });
          try {
            return (await client.sendRequest(
              ExecuteCommandRequest.type,
              { command, arguments: args, workDoneToken: token },
              cancel,
            )) as T;
          } finally {
            listener.dispose();
          }
        },
      );
    } catch (error) {
      if (!isCancelled(error)) {
        void vscode.window.showErrorMessage(`Fettle: ${errorMessage(error)}`);
      }
      return undefined;
    } finally {
      this.working -= 1;
      this.render();
      this.refreshStats();
    }
  }

  async rewriteSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const client = this.client;
    if (!editor || !client) {
      return;
    }
    const document = editor.document;
    const range = toRange(editor.selection);
    // The server's presets (`edit.actions`) are its code actions for the selection.
    const actions = (await client
      .sendRequest(CodeActionRequest.type, {
        textDocument: { uri: document.uri.toString() },
        range,
        context: { diagnostics: [], only: ['refactor.rewrite'], triggerKind: 1 },
      })
      .then((r) => r ?? [], () => [])) as { title: string; command?: { arguments?: unknown[] } }[];
    const presets = actions
      .map((a) => ({ label: a.title.replace(/^Fettle: /, ''), instruction: instructionOf(a.command?.arguments) }))
      .filter((p): p is { label: string; instruction: string } => p.instruction !== undefined);
    const typeOwn = { label: '$(edit) Type an instruction…', instruction: undefined as string | undefined };
    const pick = presets.length
      ? await vscode.window.showQuickPick([typeOwn, ...presets], { placeHolder: 'Rewrite the selection' })
      : typeOwn;
    if (!pick) {
      return;
    }
    const instruction =
      pick.instruction ??
      (await vscode.window.showInputBox({ prompt: 'Fettle: how should the selection change?', placeHolder: 'e.g. use a dict instead of the if-chain' }));
    if (!instruction) {
      return;
    }
    const result = await this.execute<{ applied?: boolean; summary?: string }>(
      'Fettle: rewriting',
      'fettle.rewrite',
      rewriteArguments(document.uri.toString(), range, document.version, instruction),
    );
    if (result?.summary) {
      const show = result.applied ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
      void show(`Fettle: ${result.summary}`);
    }
  }

  async runTask(title: string, command: string, args: unknown[], chat = false): Promise<void> {
    const result = await this.execute<TaskResult>(title, command, args);
    if (chat) {
      this.chatView.ended(result);
    }
    if (!result) {
      return;
    }
    // "Last task" for Show Diff and Undo: the last that changed a file (a
    // chat follow-up that only answered must not hide the change before).
    if (result.changedFiles?.length) {
      this.lastTask = result;
    }
    const buttons = result.changedFiles?.length ? ['Show Diff', 'Undo', 'Task Log'] : ['Task Log'];
    const pick = await vscode.window.showInformationMessage(taskMessage(result), ...buttons);
    if (pick === 'Show Diff') {
      await this.showDiff();
    } else if (pick === 'Undo') {
      await this.undo();
    } else if (pick === 'Task Log') {
      this.tasks.show(true);
    }
  }

  async chat(): Promise<void> {
    const typed = await vscode.window.showInputBox(
      this.chatView.turns > 0
        ? { prompt: 'Fettle: follow-up (it continues the conversation; start with /new for a new one)', placeHolder: 'e.g. now also handle the empty list' }
        : { prompt: 'Fettle: what should change?', placeHolder: 'e.g. make the tests pass' },
    );
    if (!typed) {
      return;
    }
    const { message, fresh } = chatMessage(typed);
    if (message.trim() === '') {
      return;
    }
    const continued = !fresh && this.chatView.turns > 0;
    this.chatView.begin(message, continued);
    const editor = vscode.window.activeTextEditor;
    const range = editor ? toRange(editor.selection) : undefined;
    await this.runTask(
      'Fettle: working',
      'fettle.chat',
      chatArguments(message, editor?.document.uri.toString(), range, continued),
      true,
    );
  }

  async fixFile(): Promise<void> {
    const uri = vscode.window.activeTextEditor?.document.uri.toString();
    await this.runTask('Fettle: fixing diagnostics', 'fettle.fixDiagnostics', fixArguments(uri));
  }

  async undo(): Promise<void> {
    const result = await this.execute<{ restored?: string[]; unchanged?: string[]; skipped?: { uri: string; reason: string }[] }>(
      'Fettle: undoing the last task',
      'fettle.undo',
      taskArguments(this.lastTask?.taskId),
    );
    if (result) {
      const skipped = result.skipped?.length ? `; ${result.skipped.length} skipped (see the message)` : '';
      const restored = result.restored?.length ?? 0;
      const unchanged = result.unchanged?.length ?? 0;
      const what =
        restored === 0 && unchanged > 0
          ? 'nothing to restore (already as before the task)'
          : `restored ${restored} file(s)`;
      void vscode.window.showInformationMessage(`Fettle: ${what}${skipped}`);
    }
  }

  async cancel(): Promise<void> {
    await this.client?.sendRequest(ExecuteCommandRequest.type, { command: 'fettle.cancel', arguments: taskArguments(undefined) });
  }

  async showStats(): Promise<void> {
    if (!this.client?.isRunning()) {
      return;
    }
    const stats = await this.client.sendRequest('fettle/stats', {});
    this.output.appendLine(`fettle/stats: ${JSON.stringify(stats, null, 2)}`);
    this.output.show(true);
  }

  async showDiff(): Promise<void> {
    await this.diffView.show(this.lastTask);
  }
}

let fettle: Fettle | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('Fettle', { log: true });
  const tasks = vscode.window.createOutputChannel('Fettle Tasks');
  context.subscriptions.push(output, tasks);
  const properties = (context.extension.packageJSON as PackageJson).contributes.configuration.properties;
  const keys = Object.keys(properties).map((key) => key.replace(/^fettle\./, ''));
  const instance = new Fettle(context, output, tasks, keys);
  fettle = instance;
  const commands: [string, () => unknown][] = [
    ['fettle.vscode.rewriteSelection', () => instance.rewriteSelection()],
    ['fettle.vscode.fixFile', () => instance.fixFile()],
    ['fettle.vscode.chat', () => instance.chat()],
    ['fettle.vscode.undo', () => instance.undo()],
    ['fettle.vscode.cancel', () => instance.cancel()],
    ['fettle.vscode.showStats', () => instance.showStats()],
    ['fettle.vscode.showDiff', () => instance.showDiff()],
    ['fettle.vscode.showTaskLog', () => tasks.show(true)],
    ['fettle.vscode.showLog', () => output.show(true)],
    ['fettle.vscode.restart', () => instance.restart()],
    ['fettle.vscode.toggleGhostText', () => instance.toggleGhostText()],
  ];
  for (const [id, run] of commands) {
    context.subscriptions.push(vscode.commands.registerCommand(id, run));
  }
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => instance.onConfigurationChanged(e)));
  await instance.start();
}

export async function deactivate(): Promise<void> {
  await fettle?.stop();
  fettle = undefined;
}

interface PackageJson {
  contributes: { configuration: { properties: Record<string, unknown> } };
}

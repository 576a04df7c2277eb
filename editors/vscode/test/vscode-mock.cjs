// A stand-in for the `vscode` module in the unit tests (VS Code itself
// cannot run here): what the extension calls, recorded, with scripted
// answers for the user's inputs. Anything else (vscode-languageclient's
// classes, read when it is imported) is a blank class.
'use strict';

const calls = [];
const answers = { inputBox: [], quickPick: [], message: [] };
const settings = {};
const editorState = { activeTextEditor: undefined };
const statusBar = { text: '', tooltip: '', command: '', visible: false };
const listeners = { selection: [], activeEditor: [] };
const documents = [];
const env = { remoteName: undefined };

class EventEmitter {
  constructor() {
    this.listeners = [];
    this.event = (listener) => {
      this.listeners.push(listener);
      return { dispose() {} };
    };
  }
  fire(value) {
    this.listeners.forEach((l) => l(value));
  }
  dispose() {
    this.listeners = [];
  }
}

const record = (api, result) => (...args) => {
  calls.push({ api, args });
  return result;
};

const window = {
  get activeTextEditor() {
    return editorState.activeTextEditor;
  },
  createStatusBarItem: () => ({
    set text(v) { statusBar.text = v; },
    get text() { return statusBar.text; },
    set tooltip(v) { statusBar.tooltip = v; },
    set command(v) { statusBar.command = v; },
    show() { statusBar.visible = true; },
    hide() { statusBar.visible = false; },
    dispose() {},
  }),
  onDidChangeTextEditorSelection(listener) {
    listeners.selection.push(listener);
    return { dispose() {} };
  },
  onDidChangeActiveTextEditor(listener) {
    listeners.activeEditor.push(listener);
    return { dispose() {} };
  },
  createOutputChannel: (name) => ({
    name,
    appendLine(line) { calls.push({ api: `output:${name}`, args: [line] }); },
    append(text) { calls.push({ api: `output.append:${name}`, args: [text] }); },
    error(line) { calls.push({ api: `output.error:${name}`, args: [line] }); },
    warn(line) { calls.push({ api: `output.warn:${name}`, args: [line] }); },
    show() {},
    dispose() {},
  }),
  async showInputBox(...args) {
    calls.push({ api: 'showInputBox', args });
    return answers.inputBox.shift();
  },
  async showQuickPick(items, ...rest) {
    calls.push({ api: 'showQuickPick', args: [items, ...rest] });
    const pick = answers.quickPick.shift();
    return pick ? pick(items) : undefined;
  },
  async showInformationMessage(...args) {
    calls.push({ api: 'showInformationMessage', args });
    return answers.message.shift();
  },
  async showWarningMessage(...args) {
    calls.push({ api: 'showWarningMessage', args });
    return answers.message.shift();
  },
  async showErrorMessage(...args) {
    calls.push({ api: 'showErrorMessage', args });
    return undefined;
  },
  async withProgress(options, task) {
    calls.push({ api: 'withProgress', args: [options] });
    const progress = { report: (value) => calls.push({ api: 'progress.report', args: [value] }) };
    const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose() {} }) };
    return task(progress, token);
  },
};

const files = {};

const Uri = {
  joinPath: (base, ...parts) => Uri.file([base.path, ...parts].join('/')),
  file: (path) => ({ scheme: 'file', path, toString: () => `file://${path}` }),
  parse: (text) => ({ scheme: text.split(':')[0], path: text.replace(/^file:\/\//, ''), toString: () => text }),
  from: ({ scheme, path, query }) => ({ scheme, path, query, toString: () => `${scheme}:${path}?${query}` }),
};

const workspace = {
  async openTextDocument(uri) {
    calls.push({ api: 'openTextDocument', args: [uri.toString()] });
    return { getText: () => files[uri.path] };
  },
  getConfiguration: () => ({
    get: (key) => settings[key],
    inspect: (key) => (key in settings ? { globalValue: settings[key] } : {}),
    async update(key, value, target) {
      calls.push({ api: 'configuration.update', args: [key, value, target] });
      if (value === undefined) {
        delete settings[key];
      } else {
        settings[key] = value;
      }
    },
  }),
  registerTextDocumentContentProvider: record('registerTextDocumentContentProvider', { dispose() {} }),
  onDidChangeConfiguration: record('onDidChangeConfiguration', { dispose() {} }),
  workspaceFolders: undefined,
  textDocuments: documents,
};

const commands = {
  registerCommand: record('registerCommand', { dispose() {} }),
  async executeCommand(...args) {
    calls.push({ api: 'executeCommand', args });
  },
};

const known = {
  calls, answers, settings, editorState, statusBar, files, Uri, listeners, documents, env,
  EventEmitter,
  StatusBarAlignment: { Left: 1, Right: 2 },
  ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
  ConfigurationTarget: { Global: 1, Workspace: 2, WorkspaceFolder: 3 },
  window, workspace, commands,
};

module.exports = new Proxy(known, {
  get: (target, key) => (key in target ? target[key] : class {}),
});

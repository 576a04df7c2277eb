// The conversation of Fettle: Chat, an output channel: what the user said,
// the running task's text as it streams, its steps a line each, and how it
// ended. A follow-up continues the conversation the server keeps.
import * as vscode from 'vscode';

import type { TaskResult } from './commands';

/** A `fettle/taskEvent` notification. */
export interface TaskEvent {
  taskId: string;
  kind: string;
  text: string;
}

export class ChatView {
  private readonly channel: vscode.OutputChannel;
  /** Turns of the conversation so far (the server's count once one ended). */
  turns = 0;
  /** The running chat's task, once its first event names it. */
  private running: { task?: string } | undefined;
  private streaming = false;

  constructor(subscriptions: { dispose(): unknown }[]) {
    this.channel = vscode.window.createOutputChannel('Fettle Chat');
    subscriptions.push(this.channel);
  }

  /** A turn starts: the user's message, shown; a fresh one after a conversation says so. */
  begin(message: string, continued: boolean): void {
    if (!continued && this.turns > 0) {
      this.channel.appendLine('\n--- new conversation ---');
    }
    this.channel.appendLine(`\nYou: ${message}\n\nFettle:`);
    this.channel.show(true);
    this.running = {};
    this.streaming = false;
  }

  /** The running chat's events: text as it streams, the rest a line each. */
  event(event: TaskEvent): void {
    const running = this.running;
    if (!running) {
      return;
    }
    if (running.task === undefined) {
      // The agent's first event names the task.
      if (event.kind !== 'status' || !event.text.startsWith('Started:')) {
        return;
      }
      running.task = event.taskId;
    }
    if (event.taskId !== running.task) {
      return;
    }
    if (event.kind === 'text') {
      this.channel.append(event.text);
      this.streaming = true;
      return;
    }
    this.endStream();
    // A step's first line; what follows a status (the suspects, a test
    // command's last lines) indented below, a few lines at most.
    const [first, ...rest] = event.text.split('\n');
    this.channel.appendLine(`  · ${first}`);
    for (const line of event.kind === 'status' ? rest.slice(0, 8) : []) {
      this.channel.appendLine(`    ${line}`);
    }
  }

  /** A chat's end: its summary (or that no answer came). */
  ended(result: TaskResult | undefined): void {
    this.running = undefined;
    this.endStream();
    if (!result) {
      this.channel.appendLine('\n[no answer: see the Fettle output]');
      return;
    }
    this.turns = result.conversation?.turns ?? this.turns + 1;
    this.channel.appendLine(`\n[${result.status}]\n${result.summary}`);
  }

  private endStream(): void {
    if (this.streaming) {
      this.channel.appendLine('');
      this.streaming = false;
    }
  }
}

// The one output channel ("exportlens"): the extension's own messages, the server's
// stderr and, with `exportlens.trace.server`, the LSP traffic all land here, so
// "Show Output" is the single place to look when something goes wrong.
import * as util from 'util';
import { LogOutputChannel, window } from 'vscode';

let channel: LogOutputChannel | undefined;

export function createLogChannel(): LogOutputChannel {
    channel = window.createOutputChannel('exportlens', { log: true });
    return channel;
}

export function logInfo(...args: unknown[]): void {
    channel?.info(util.format(...args));
}

export function logWarn(...args: unknown[]): void {
    channel?.warn(util.format(...args));
}

export function logError(...args: unknown[]): void {
    channel?.error(util.format(...args));
}

export function showLog(): void {
    channel?.show(true);
}

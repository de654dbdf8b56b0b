// What the status bar says for the server's `exportlens.status` answer. Pure, so the
// mapping (and its tolerance of a malformed answer) is unit-tested without VS Code.

export type ExportState = 'exporting' | 'ok' | 'error' | 'idle';

export interface TargetStatus {
    name: string;
    status?: string;
    exportMs?: number;
}

export interface FileStatus {
    state: ExportState;
    errors: number;
    targets: TargetStatus[];
}

export interface StatusView {
    text: string;
    tooltip: string;
    /** 'error' and 'warning' pick the status bar's error/warning background. */
    tone: 'normal' | 'warning' | 'error';
    /** VS Code command the item runs on click. */
    command: string;
}

const STATES: readonly ExportState[] = ['exporting', 'ok', 'error', 'idle'];

/** The server's answer, checked: anything unexpected becomes undefined, never a throw. */
export function parseStatus(raw: unknown): FileStatus | undefined {
    if (raw === null || typeof raw !== 'object') {
        return undefined;
    }
    const obj = raw as Record<string, unknown>;
    const state = obj.state;
    if (typeof state !== 'string' || !(STATES as readonly string[]).includes(state)) {
        return undefined;
    }
    const errors = typeof obj.errors === 'number' && Number.isFinite(obj.errors) ? obj.errors : 0;
    const targets: TargetStatus[] = [];
    if (Array.isArray(obj.targets)) {
        for (const t of obj.targets) {
            // Names alone or {name, status, export_ms} objects: both are accepted.
            if (typeof t === 'string') {
                targets.push({ name: t });
            } else if (t !== null && typeof t === 'object' && typeof (t as { name?: unknown }).name === 'string') {
                const rec = t as { name: string; status?: unknown; export_ms?: unknown };
                const target: TargetStatus = { name: rec.name };
                if (typeof rec.status === 'string') {
                    target.status = rec.status;
                }
                if (typeof rec.export_ms === 'number') {
                    target.exportMs = rec.export_ms;
                }
                targets.push(target);
            }
        }
    }
    return { state: state as ExportState, errors, targets };
}

function plural(n: number, word: string): string {
    return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function describeStatus(status: FileStatus): StatusView {
    const names = status.targets.map((t) => t.name).join(', ');
    const targetsLine = status.targets.length ? `\nTargets: ${names}` : '';
    switch (status.state) {
        case 'exporting':
            return {
                text: '$(sync~spin) exportlens: exporting',
                tooltip: `exportlens is exporting this file${targetsLine}`,
                tone: 'normal',
                command: 'exportlens.showOutput',
            };
        case 'ok':
            return {
                text: '$(check) exportlens',
                tooltip: `Exported: ${plural(status.targets.length, 'target')}${targetsLine}\nClick to show the exported graph`,
                tone: 'normal',
                command: 'exportlens.showGraph',
            };
        case 'error': {
            const count = Math.max(status.errors, 1);
            return {
                text: `$(error) exportlens: ${plural(count, 'error')}`,
                tooltip: `The export of this file failed: ${plural(count, 'error')}${targetsLine}\nClick to show the Problems panel`,
                tone: 'error',
                command: 'workbench.actions.view.problems',
            };
        }
        case 'idle':
            return {
                text: 'exportlens: idle',
                tooltip: 'exportlens has no export result for this file (no declared target, or not exported yet)',
                tone: 'normal',
                command: 'exportlens.showOutput',
            };
    }
}

/** Shown when the server is not running (not installed, failed to start, stopped). */
export function describeServerDown(reason: string): StatusView {
    return {
        text: '$(warning) exportlens: not running',
        tooltip: `${reason}\nClick to show the exportlens output`,
        tone: 'warning',
        command: 'exportlens.showOutput',
    };
}

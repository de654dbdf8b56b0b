// Which Python runs the server. Pure (Node's `path` only), so the order is unit-tested:
//   1. the `exportlens.interpreter` setting,
//   2. the interpreter selected in the Python extension (ms-python.python), when present,
//   3. `python3` from PATH.
import * as path from 'path';

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface InterpreterChoice {
    command: string;
    source: InterpreterSource;
}

export const DEFAULT_INTERPRETER = 'python3';

export interface ChoiceInputs {
    /** `exportlens.interpreter` as set (may be empty or whitespace). */
    setting: string | undefined;
    /** The Python extension's active interpreter, or undefined (absent, none selected, failed). */
    pythonExtension: string | undefined;
    /** First workspace folder (for `${workspaceFolder}` and relative paths). */
    workspaceFolder: string | undefined;
    home: string;
}

/** Whether the setting names an interpreter (else the Python extension is asked). */
export function settingIsSet(setting: string | undefined): setting is string {
    return typeof setting === 'string' && setting.trim() !== '';
}

/**
 * `${workspaceFolder}`, `${userHome}` and a leading `~` expanded; a relative path with a
 * folder part (`.venv/bin/python`) taken from the workspace folder. A bare name
 * (`python3.11`) stays as it is, for PATH lookup like a shell would do.
 */
export function expandInterpreterPath(value: string, workspaceFolder: string | undefined, home: string): string {
    let out = value.trim();
    out = out.replace(/\$\{userHome\}/g, home);
    if (workspaceFolder !== undefined) {
        out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
    }
    if (out === '~' || out.startsWith('~/')) {
        out = path.join(home, out.slice(1));
    }
    const hasFolderPart = out.includes('/') || out.includes(path.sep);
    if (hasFolderPart && !path.isAbsolute(out) && workspaceFolder !== undefined) {
        out = path.resolve(workspaceFolder, out);
    }
    return out;
}

export function chooseInterpreter(inputs: ChoiceInputs): InterpreterChoice {
    if (settingIsSet(inputs.setting)) {
        return {
            command: expandInterpreterPath(inputs.setting, inputs.workspaceFolder, inputs.home),
            source: 'setting',
        };
    }
    if (inputs.pythonExtension !== undefined && inputs.pythonExtension.trim() !== '') {
        return { command: inputs.pythonExtension, source: 'python-extension' };
    }
    return { command: DEFAULT_INTERPRETER, source: 'default' };
}

export function describeChoice(choice: InterpreterChoice): string {
    const from = {
        setting: 'from the exportlens.interpreter setting',
        'python-extension': "selected in the Python extension",
        default: 'the default; set exportlens.interpreter or select one in the Python extension',
    }[choice.source];
    return `${choice.command} (${from})`;
}

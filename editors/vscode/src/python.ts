// The interpreter selected in the Python extension (ms-python.python), through its
// public API (`environments.getActiveEnvironmentPath` / `resolveEnvironment`). Typed
// locally with only what is used, instead of depending on @vscode/python-extension.
import { Disposable, Event, extensions, Uri } from 'vscode';
import { logWarn } from './log';

const PYTHON_EXTENSION_ID = 'ms-python.python';

interface EnvironmentPath {
    id: string;
    path: string;
}

interface ResolvedEnvironment {
    executable: { uri: Uri | undefined };
}

interface PythonEnvironmentsApi {
    getActiveEnvironmentPath(resource?: Uri): EnvironmentPath;
    resolveEnvironment(environment: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
    onDidChangeActiveEnvironmentPath: Event<unknown>;
}

interface PythonExtensionApi {
    environments?: PythonEnvironmentsApi;
}

async function environmentsApi(): Promise<PythonEnvironmentsApi | undefined> {
    const extension = extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
    if (extension === undefined) {
        return undefined;
    }
    try {
        const api = extension.isActive ? extension.exports : await extension.activate();
        return api?.environments;
    } catch (error) {
        logWarn(`The Python extension did not activate: ${String(error)}`);
        return undefined;
    }
}

/** The executable the Python extension selected for `resource`, if it is installed. */
export async function pythonExtensionInterpreter(resource: Uri | undefined): Promise<string | undefined> {
    const api = await environmentsApi();
    if (api === undefined) {
        return undefined;
    }
    try {
        const active = api.getActiveEnvironmentPath(resource);
        const resolved = await api.resolveEnvironment(active);
        return resolved?.executable.uri?.fsPath ?? active.path;
    } catch (error) {
        logWarn(`The Python extension could not tell its interpreter: ${String(error)}`);
        return undefined;
    }
}

/** Calls `listener` when the user picks another interpreter in the Python extension. */
export async function onPythonInterpreterChange(listener: () => void): Promise<Disposable | undefined> {
    const api = await environmentsApi();
    return api?.onDidChangeActiveEnvironmentPath(() => listener());
}

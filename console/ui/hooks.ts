/**
 * Loading data for a page: one call per change of its inputs, the older call aborted when the
 * inputs change again (a fast typist or Back pressed twice does not show a stale answer), and the
 * signed-in user shared with every page.
 */
import { createContext } from 'preact';
import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import type { Me } from '../api.ts';
import { problem } from './api.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: string;
  loading: boolean;
  /** Runs the call again with the same inputs. */
  reload: () => void;
}

/** Runs `load` when `inputs` change (compared by value, as JSON) and keeps its answer. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, inputs: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: string; loading: boolean }>({ data: undefined, error: '', loading: true });
  const [tick, setTick] = useState(0);
  const latest = useRef(load);
  latest.current = load;
  const key = JSON.stringify(inputs);

  useEffect(() => {
    const controller = new AbortController();
    setState((old) => ({ ...old, error: '', loading: true }));
    latest.current(controller.signal).then(
      (data) => !controller.signal.aborted && setState({ data, error: '', loading: false }),
      (err) => !controller.signal.aborted && setState((old) => ({ data: old.data, error: problem(err), loading: false })),
    );
    return () => controller.abort();
  }, [key, tick]);

  return { ...state, reload: () => setTick((n) => n + 1) };
}

/** The signed-in user and tenant; pages render only inside a session. */
export const SessionContext = createContext<Me | undefined>(undefined);

export function useSession(): Me {
  const me = useContext(SessionContext);
  if (!me) throw new Error('useSession outside a session');
  return me;
}

/** Document title per page: "Logs · Sluice". */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = title ? `${title} · Sluice` : 'Sluice';
  }, [title]);
}

/**
 * A change the user makes (a button, a form): one at a time, busy while it runs, its failure
 * kept to be shown beside it; `after` runs once it succeeded (a reload of what it changed).
 */
export function useChange(after: () => void = () => {}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const run = async (change: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true);
    setError('');
    try {
      await change();
      after();
      return true;
    } catch (err) {
      setError(problem(err));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}

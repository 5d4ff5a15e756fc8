/**
 * Client-side routing on the History API: the server answers index.html for every path outside
 * /api, and the app picks the page from location.pathname. The query string holds a page's view
 * (time range, filters), so a URL can be shared and Back goes to the previous view.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

export interface Place {
  path: string;
  query: URLSearchParams;
}

const listeners = new Set<() => void>();

function current(): Place {
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

/** Goes to `url` (same origin); `replace` rewrites the current history entry (filters typed in). */
export function navigate(url: string, options: { replace?: boolean } = {}): void {
  if (options.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  if (!options.replace) window.scrollTo(0, 0);
  for (const listener of listeners) listener();
}

window.addEventListener('popstate', () => {
  for (const listener of listeners) listener();
});

/** The current path and query, re-rendering the caller when they change. */
export function usePlace(): Place {
  const [place, setPlace] = useState(current);
  useEffect(() => {
    const update = () => setPlace(current());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return place;
}

/** `path` with `params` as its query string; empty values are left out. */
export function href(path: string, params: Record<string, string | string[] | undefined> = {}): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    for (const one of Array.isArray(value) ? value : [value]) if (one) query.append(key, one);
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** The current URL with some query parameters set (undefined or '' removes one). */
export function withQuery(changes: Record<string, string | string[] | undefined>): string {
  const query = new URLSearchParams(location.search);
  for (const [key, value] of Object.entries(changes)) {
    query.delete(key);
    for (const one of Array.isArray(value) ? value : [value]) if (one) query.append(key, one);
  }
  const text = query.toString();
  return text ? `${location.pathname}?${text}` : location.pathname;
}

/** Matches `/traces/:traceId`-style patterns; the parameters come back decoded. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const clean = (text: string) => text.replace(/\/+$/, '') || '/';
  const want = clean(pattern).split('/');
  const got = clean(path).split('/');
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const part = want[i]!;
    if (part.startsWith(':')) {
      if (!got[i]) return undefined;
      try {
        params[part.slice(1)] = decodeURIComponent(got[i]!);
      } catch {
        return undefined;
      }
    } else if (part !== got[i]) return undefined;
  }
  return params;
}

interface LinkProps {
  href: string;
  children?: ComponentChildren;
  class?: string;
  title?: string;
  'aria-current'?: 'page' | 'true';
  'data-testid'?: string;
}

/** A real link (it opens in a new tab with the usual keys) that navigates in place on a plain click. */
export function Link({ href: to, children, ...rest }: LinkProps) {
  const onClick = (event: MouseEvent) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return <a {...rest} href={to} onClick={onClick}>{children}</a>;
}

/**
 * The app's frame: it asks GET /api/me who is signed in, shows the sign-in or first-run page when
 * nobody is, and otherwise the nav bar and the page the path names. A 401 from any later call
 * ends the session in the app too and returns to sign-in, then to the page the user was on.
 */
import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Me } from '../api.ts';
import { api, problem, rememberSession, whenSignedOut } from './api.ts';
import { SessionContext } from './hooks.ts';
import { AlertRulePage, AlertsPage } from './pages/alerts.tsx';
import { DashboardPage, DashboardsPage } from './pages/dashboards.tsx';
import { DeploysPage } from './pages/deploys.tsx';
import { FirstRunPage, InvitePage, SignInPage } from './pages/sign-in.tsx';
import { AccountPage, UsersPage } from './pages/users.tsx';
import { FormPage, RelayPage, SitePage } from './pages/relay.tsx';
import { RelaySettingsPage } from './pages/relay-settings.tsx';
import { InboxPage } from './pages/inbox.tsx';
import { LogsPage } from './pages/logs.tsx';
import { MetricsPage } from './pages/metrics.tsx';
import { OverviewPage } from './pages/overview.tsx';
import { ServicePage, ServicesPage } from './pages/services.tsx';
import { SourcesPage } from './pages/sources.tsx';
import { TracePage } from './pages/trace.tsx';
import { TracesPage } from './pages/traces.tsx';
import { Link, href, match, navigate, usePlace, type Place } from './router.tsx';
import { rangeQuery } from './time-range.tsx';

type Page = (props: { place: Place; params: Record<string, string> }) => JSX.Element;

const PAGES: Array<[pattern: string, page: Page]> = [
  ['/', ServicesPage],
  ['/services/:service', ServicePage],
  ['/ingest', OverviewPage],
  ['/sources', SourcesPage],
  ['/logs', LogsPage],
  ['/traces', TracesPage],
  ['/traces/:traceId', TracePage],
  ['/metrics', MetricsPage],
  ['/deploys', DeploysPage],
  ['/dashboards', DashboardsPage],
  ['/dashboards/:id', DashboardPage],
  ['/alerts', AlertsPage],
  ['/alerts/:id', AlertRulePage],
  ['/inbox', InboxPage],
  ['/users', UsersPage],
  ['/relay', RelayPage],
  ['/relay/settings', RelaySettingsPage],
  ['/relay/sites/:siteId', SitePage],
  ['/relay/sites/:siteId/forms/:formId', FormPage],
];

/** The nav's pages; some only where their module runs. */
const NAV: Array<[path: string, label: string, testid: string, shown?: (me: Me) => boolean]> = [
  ['/', 'Services', 'nav-services'],
  ['/sources', 'Sources', 'nav-sources'],
  ['/logs', 'Logs', 'nav-logs'],
  ['/traces', 'Traces', 'nav-traces'],
  ['/metrics', 'Metrics', 'nav-metrics'],
  ['/deploys', 'Deploys', 'nav-deploys'],
  ['/dashboards', 'Dashboards', 'nav-dashboards'],
  ['/alerts', 'Alerts', 'nav-alerts'],
  ['/ingest', 'Ingest', 'nav-ingest'],
  ['/relay', 'Relay', 'nav-relay', (me) => me.relay !== null],
  ['/users', 'Users', 'nav-users'],
  // The development inbox (SLUICE_DELIVERY_INBOX).
  ['/inbox', 'Inbox', 'nav-inbox', (me) => me.deliveryInbox],
];
/** Pages that have no time range: their nav link carries none along. */
const WITHOUT_RANGE = new Set(['/sources', '/dashboards', '/alerts', '/inbox', '/users', '/relay']);

/** The pages one sees signed out. */
const SIGNED_OUT_PAGES = new Set(['/sign-in', '/first-run', '/invite']);

/** The sign-in page, with the page to return to. */
function signInUrl(): string {
  const back = location.pathname + location.search;
  return href('/sign-in', { next: back === '/' || back.startsWith('/sign-in') ? undefined : back });
}

function NavBar({ me, place, onSignOut }: { me: Me; place: Place; onSignOut: () => void }) {
  // The nav links carry the time range along: from Logs of the last 6 h to Traces of the last 6 h.
  const range = rangeQuery(place);
  // Services is the landing page, and a service's page is under it.
  const active = (path: string) => (path === '/' ? place.path === '/' || place.path.startsWith('/services/') : place.path === path || place.path.startsWith(`${path}/`));
  return (
    <header class="topbar">
      <nav aria-label="Console">
        <span class="brand">Sluice</span>
        <ul>
          {NAV.filter(([, , , shown]) => !shown || shown(me)).map(([path, label, testid]) => (
            <li key={path}>
              <Link href={WITHOUT_RANGE.has(path) ? path : href(path, range)} class={active(path) ? 'active' : ''} aria-current={active(path) ? 'page' : undefined} data-testid={testid}>
                {label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <div class="who">
        <span class="tenant" data-testid="nav-tenant">{me.tenant.name}</span>
        <Link href="/account" class="user" aria-current={place.path === '/account' ? 'page' : undefined} data-testid="nav-user" title={`${me.user.email}: your account`}>{me.user.name || me.user.email}</Link>
        <button type="button" class="small-button" onClick={onSignOut} data-testid="sign-out">Sign out</button>
      </div>
    </header>
  );
}

/** `/` focuses the page's search box, as on most consoles, unless the user is typing somewhere. */
function focusSearchOnSlash(event: KeyboardEvent): void {
  if (event.key !== '/' || event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target as HTMLElement | null;
  if (target && (target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName))) return;
  const search = document.querySelector<HTMLElement>('[data-search]');
  if (!search) return;
  event.preventDefault();
  search.focus();
}

export function App() {
  const place = usePlace();
  const [me, setMe] = useState<Me | undefined>();
  const [state, setState] = useState<'loading' | 'ready' | 'failed'>('loading');
  const [error, setError] = useState('');

  const signedIn = (who: Me | undefined) => {
    rememberSession(who);
    setMe(who);
  };

  useEffect(() => {
    whenSignedOut(() => {
      signedIn(undefined);
      if (!location.pathname.startsWith('/sign-in')) navigate(signInUrl(), { replace: true });
    });
    api.me().then(
      (who) => {
        signedIn(who);
        setState('ready');
      },
      (err) => {
        if ((err as { status?: number }).status === 401) setState('ready');
        else {
          setError(problem(err));
          setState('failed');
        }
      },
    );
    document.addEventListener('keydown', focusSearchOnSlash);
    return () => document.removeEventListener('keydown', focusSearchOnSlash);
  }, []);

  // Signed out: everything but first-run and an invitation shows sign-in. Signed in: those lead home.
  useEffect(() => {
    if (state !== 'ready') return;
    if (!me && !SIGNED_OUT_PAGES.has(place.path)) navigate(signInUrl(), { replace: true });
    if (me && SIGNED_OUT_PAGES.has(place.path)) navigate('/', { replace: true });
  }, [state, me, place.path]);

  if (state === 'loading') return <main class="boot"><p role="status">Loading…</p></main>;
  if (state === 'failed') return <main class="boot"><p class="note note-error" role="alert">{error}</p></main>;

  const onSignedIn = (who: Me, next: string) => {
    signedIn(who);
    navigate(next, { replace: true });
  };
  if (!me) {
    if (place.path === '/first-run') return <FirstRunPage onSignedIn={onSignedIn} />;
    if (place.path === '/invite') return <InvitePage onSignedIn={onSignedIn} />;
    return <SignInPage place={place} onSignedIn={onSignedIn} />;
  }

  // Signed out here whatever the server said (the cookie is the server's to clear), or everywhere.
  const signedOut = () => {
    signedIn(undefined);
    navigate('/sign-in', { replace: true });
  };
  const signOut = async () => {
    await api.signOut().catch(() => {});
    signedOut();
  };
  const found = PAGES.map(([pattern, page]) => [match(pattern, place.path), page] as const).find(([params]) => params);
  return (
    <SessionContext.Provider value={me}>
      <a class="skip-link" href="#main">Skip to the page</a>
      <NavBar me={me} place={place} onSignOut={signOut} />
      <main class="page" id="main" tabIndex={-1}>
        {place.path === '/account' ? (
          <AccountPage onSignedIn={signedIn} onSignedOut={signedOut} />
        ) : found ? (
          (() => {
            const [params, Page] = found;
            return <Page place={place} params={params!} />;
          })()
        ) : (
          <section class="empty" data-testid="not-found">
            <h1>Nothing here</h1>
            <p>This address is not a page of the console. <Link href="/">Go to the overview</Link>.</p>
          </section>
        )}
      </main>
    </SessionContext.Provider>
  );
}

/**
 * The console's entry point, bundled by build.ts: renders the app into index.html's #app.
 * The style sheet is a separate entry (styles.css), so the page needs no inline style.
 */
import { render } from 'preact';
import { App } from './app.tsx';

render(<App />, document.getElementById('app')!);

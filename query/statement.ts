/**
 * Which statements the query endpoint runs, decided by ClickHouse's own parser, not by
 * patterns over the client's text:
 *
 * 1. `formatQuery()` parses the text, given to it as one string literal (its quotes and
 *    backslashes escaped; not bound as a parameter: chDB runs every bound statement of the
 *    process one after another, so one slow client query with parameters would hold up every
 *    check). It fails on a syntax error and on more than one statement, and gives the statement
 *    back as the formatter writes it (no comments, no trailing semicolon). That text is what runs.
 * 2. `EXPLAIN AST` of that one statement gives its tree, one node a line (TabSeparated, so a
 *    name holding a newline cannot forge a line).
 *
 * The engine enforces read-only itself (every statement runs with readonly = 1, see
 * request.ts), but readonly = 1 in chDB leaves some doors open, which the tree closes (each
 * tried on chDB 26.7):
 * - a SETTINGS clause in a subquery applies there even under readonly = 1
 *   (`SELECT * FROM (SELECT … SETTINGS readonly = 0)` may call file()): no SETTINGS anywhere;
 * - `INTO OUTFILE` writes the file (clickhouse-local writes it, not the server): refused;
 * - `KILL QUERY` is allowed (it could kill the ingestion's inserts): only reading kinds run;
 * - the file() function reads any file of the process (the data dir holds secrets), and
 *   DESCRIBE of a table function reads what it names to infer its columns: file() is refused,
 *   and table functions other than a few generators and views (merge() too: it reads the
 *   tables of any database);
 * - every table the statement names, wherever it does (FROM, JOIN, the right side of IN,
 *   DESCRIBE, EXISTS, SHOW CREATE), must be one the scope shows (scope.ts): chDB's `default`
 *   database answers for any file of the process by its path (`EXISTS TABLE
 *   default.\`/etc/passwd\`` said 1), system.processes shows other clients' statements;
 * - of the SHOW statements only SHOW DATABASES, SHOW TABLES and SHOW CREATE TABLE run (not SHOW
 *   PROCESSLIST, SETTINGS, GRANTS...), and functions that tell about the server (its paths,
 *   disks, host, code: getServerSetting, filesystemCapacity, introspection) are refused; the
 *   engine refuses the introspection functions too (allow_introspection_functions = 0).
 */
import type { StatementRunner } from '../storage/chdb-reader.ts';
import { quoteString } from '../storage/storage.ts';
import { ClickHouseException } from './errors.ts';
import type { QueryScope } from './scope.ts';

export interface CheckedStatement {
  /** The statement as ClickHouse's formatter writes it: the text that runs. */
  sql: string;
  /** Its FORMAT clause, if it has one. */
  format: string | undefined;
}

/** Table functions that read nothing but their arguments (and, for view(), a subquery checked like any other). */
const TABLE_FUNCTIONS = new Set(['numbers', 'numbers_mt', 'zeros', 'zeros_mt', 'generate_series', 'generateseries', 'values', 'view']);

/**
 * Functions that read the server's files, tables by a name in a string (out of the table
 * check's sight), or tell about the server: its settings and paths, disks, host, ports, code
 * (names compared in lower case). A denylist, unlike the tables: Grafana's queries use any of
 * ClickHouse's ~1,800 functions, and these are the ones that look outside the statement.
 */
const FUNCTIONS_REFUSED = new Set([
  'file', 'catboostevaluate', 'getserversetting', 'getmergetreesetting', 'getserverport', 'getmacro', 'hostname', 'fqdn', 'serveruuid', 'tcpport',
  'filesystemavailable', 'filesystemcapacity', 'filesystemunreserved', 'getoskernelversion', 'getclienthttpheader', 'hascolumnintable',
  'addresstoline', 'addresstolinewithinlines', 'addresstosymbol', 'demangle', 'currentprofiles', 'enabledprofiles', 'currentroles', 'enabledroles', 'defaultroles',
]);

/** Prefixes of function families that read a table or dictionary named in a string: dictGet*, dictHas, joinGet*. */
const FUNCTION_PREFIXES_REFUSED = ['dict', 'joinget'];

/** in, notIn, globalIn, nullIn...: a plain identifier on their right names a table. */
const IN_FUNCTION = /^(global)?(not)?(null)?in$/i;

const READ_ONLY = 'Cannot execute query in readonly mode: the query endpoint runs SELECT, SHOW, DESCRIBE, EXISTS and EXPLAIN SELECT only';

interface AstNode {
  depth: number;
  type: string;
  /** The word after the type: a function's name. */
  name: string;
  /** The rest of the line after the type, without `(children N)` or `(alias a)`: an identifier's whole name. */
  text: string;
}

/** Parses `sql` with ClickHouse's parser and refuses what the endpoint does not run or show. */
export async function checkStatement(runner: StatementRunner, scope: QueryScope, database: string, sql: string, params: Readonly<Record<string, string>>): Promise<CheckedStatement> {
  // A NUL would end the text at the engine's C boundary, inside the literal.
  if (sql.includes('\0')) throw ClickHouseException.of('SYNTAX_ERROR', 'the query holds a NUL character');
  if (!scope.allowsDatabase(database)) throw notShown(`database ${database}`, scope);
  const formatted = await runner.run(database, `SELECT formatQuery(${quoteString(sql)})`, { format: 'RawBLOB' });
  const canonical = Buffer.from(formatted.bytes).toString('utf8');
  const tree = await runner.run(database, `EXPLAIN AST ${canonical}`, { format: 'TabSeparated', params });
  const nodes = parseAst(Buffer.from(tree.bytes).toString('utf8'));
  refuseUnsafe(nodes, canonical);
  // The formatter ends a statement's text with its FORMAT clause on a line of its own.
  const format = /\nFORMAT (\w+)$/.exec(canonical)?.[1];
  const named = statementIdentifiers(nodes, format !== undefined);
  await refuseHidden(runner, scope, database, namedTables(nodes, named), namedDatabases(nodes, named));
  return { sql: canonical, format };
}

function parseAst(text: string): AstNode[] {
  return text.split('\n').filter(Boolean).map((line) => {
    const [type = '', ...words] = line.trimStart().split(' ');
    const rest = words.join(' ').replace(/ \(children \d+\)$/, '');
    const alias = rest.lastIndexOf(' (alias ');
    return { depth: line.length - line.trimStart().length, type, name: words[0] ?? '', text: alias >= 0 && rest.endsWith(')') ? rest.slice(0, alias) : rest };
  });
}

function refuseUnsafe(nodes: AstNode[], canonical: string): void {
  const [statement, explained] = nodes;
  if (!statement || !isReading(statement.type) || (statement.type === 'Explain' && explained?.type !== 'SelectWithUnionQuery')) {
    throw ClickHouseException.of('READONLY', READ_ONLY);
  }
  // SHOW DATABASES, SETTINGS, DICTIONARIES... are all ShowTables in the tree: the text tells them apart.
  if (statement.type.startsWith('Show') && !(statement.type === 'ShowCreateTableQuery' || (statement.type === 'ShowTables' && /^SHOW (DATABASES|TABLES)\b/.test(canonical)))) {
    throw ClickHouseException.of('ACCESS_DENIED', `Not enough privileges: of the SHOW statements the query endpoint runs SHOW DATABASES, SHOW TABLES and SHOW CREATE TABLE only`);
  }
  for (const [i, node] of nodes.entries()) {
    if (node.type === 'Set') {
      throw ClickHouseException.of('READONLY', 'Cannot modify settings in readonly mode: a SETTINGS clause is not allowed here (the settings the endpoint takes go in URL parameters)');
    }
    // A literal right under the statement is its INTO OUTFILE file (or that file's COMPRESSION).
    if (node.type === 'Literal' && node.depth === 1) throw ClickHouseException.of('READONLY', 'INTO OUTFILE is not allowed here');
    if (node.type !== 'Function') continue;
    const isTableFunction = nodes[i - 1]?.type === 'TableExpression' && nodes[i - 1]!.depth === node.depth - 1;
    const name = node.name.toLowerCase();
    const refused = isTableFunction ? !TABLE_FUNCTIONS.has(name) : FUNCTIONS_REFUSED.has(name) || FUNCTION_PREFIXES_REFUSED.some((prefix) => name.startsWith(prefix));
    if (refused) throw ClickHouseException.of('ACCESS_DENIED', `Not enough privileges: ${isTableFunction ? 'table function' : 'function'} ${node.name} is not allowed here`);
  }
}

/**
 * The names right under an EXISTS, SHOW CREATE or SHOW TABLES statement, one Identifier each:
 * the database (when named) and the table, or the database. A FORMAT clause's name is the last.
 */
function statementIdentifiers(nodes: AstNode[], hasFormat: boolean): string[] {
  const names = childrenOf(nodes, 0).filter((i) => nodes[i]!.type === 'Identifier').map((i) => nodes[i]!.text);
  if (hasFormat) names.pop();
  return names;
}

/** Every table the statement names: in FROM and JOIN, on the right of IN, in DESCRIBE, EXISTS and SHOW CREATE. */
function namedTables(nodes: AstNode[], named: string[]): string[] {
  const [statement] = nodes;
  const names = nodes.filter((node) => node.type === 'TableIdentifier').map((node) => node.text);
  if ((statement?.type.startsWith('Exists') && statement.type !== 'ExistsDatabaseQuery') || statement?.type === 'ShowCreateTableQuery') names.push(named.join('.'));
  for (const [i, node] of nodes.entries()) {
    if (node.type !== 'Function' || !IN_FUNCTION.test(node.name)) continue;
    const [list] = childrenOf(nodes, i);
    const right = list === undefined ? undefined : nodes[childrenOf(nodes, list)[1]!];
    if (right?.type === 'Identifier') names.push(right.text);
  }
  return names;
}

/** Databases the statement names: EXISTS DATABASE, SHOW TABLES FROM. */
function namedDatabases(nodes: AstNode[], named: string[]): string[] {
  const [statement] = nodes;
  return statement?.type === 'ExistsDatabaseQuery' || statement?.type === 'ShowTables' ? named : [];
}

/** Indexes of the direct children of nodes[parent]. */
function childrenOf(nodes: AstNode[], parent: number): number[] {
  const children: number[] = [];
  for (let i = parent + 1; i < nodes.length && nodes[i]!.depth > nodes[parent]!.depth; i++) {
    if (nodes[i]!.depth === nodes[parent]!.depth + 1) children.push(i);
  }
  return children;
}

/**
 * Refuses a database or table the scope does not show. An unqualified plain name that is not
 * a telemetry table is a WITH clause's subquery or a table of the current database: the engine
 * says which tables of it exist, and one of those is refused (a WITH clause of the same name
 * would hide it, but a client has no need of such a name).
 */
async function refuseHidden(runner: StatementRunner, scope: QueryScope, database: string, tables: string[], databases: string[]): Promise<void> {
  for (const name of databases) if (!scope.allowsDatabase(name)) throw notShown(`database ${name}`, scope);
  const maybe: string[] = [];
  for (const name of tables) {
    const allowed = scope.allowsTable(name);
    if (allowed === 'no') throw notShown(`table ${name}`, scope);
    if (allowed === 'maybe') maybe.push(name);
  }
  if (maybe.length === 0) return;
  const found = await runner.run(database, `SELECT name FROM system.tables WHERE database = ${quoteString(database)} AND name IN (${maybe.map(quoteString).join(', ')}) LIMIT 1`, { format: 'RawBLOB' });
  const hidden = Buffer.from(found.bytes).toString('utf8').trim();
  if (hidden) throw notShown(`table ${hidden}`, scope);
}

function notShown(what: string, scope: QueryScope): ClickHouseException {
  return ClickHouseException.of('ACCESS_DENIED', `Not enough privileges: the query endpoint shows ${scope.description}; ${what.slice(0, 200)} is not one of them`);
}

function isReading(type: string): boolean {
  return type === 'SelectWithUnionQuery' || type === 'DescribeQuery' || type === 'Explain' || type.startsWith('Show') || type.startsWith('Exists');
}

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
 *   and table functions other than a few generators and views.
 */
import type { StatementRunner } from '../storage/chdb-reader.ts';
import { quoteString } from '../storage/storage.ts';
import { ClickHouseException } from './errors.ts';

export interface CheckedStatement {
  /** The statement as ClickHouse's formatter writes it: the text that runs. */
  sql: string;
  /** Its FORMAT clause, if it has one. */
  format: string | undefined;
}

/** Table functions that read nothing but tables and their arguments. */
const TABLE_FUNCTIONS = new Set(['numbers', 'numbers_mt', 'zeros', 'zeros_mt', 'generate_series', 'generateseries', 'values', 'view', 'merge']);

/** Functions that read the server's files (names compared in lower case). */
const FUNCTIONS_REFUSED = new Set(['file', 'catboostevaluate']);

const READ_ONLY = 'Cannot execute query in readonly mode: the query endpoint runs SELECT, SHOW, DESCRIBE, EXISTS and EXPLAIN SELECT only';

interface AstNode {
  depth: number;
  type: string;
  /** The word after the type: a function's name. */
  name: string;
}

/** Parses `sql` with ClickHouse's parser and refuses what the endpoint does not run. */
export async function checkStatement(runner: StatementRunner, database: string, sql: string, params: Readonly<Record<string, string>>): Promise<CheckedStatement> {
  // A NUL would end the text at the engine's C boundary, inside the literal.
  if (sql.includes('\0')) throw ClickHouseException.of('SYNTAX_ERROR', 'the query holds a NUL character');
  const formatted = await runner.run(database, `SELECT formatQuery(${quoteString(sql)})`, { format: 'RawBLOB' });
  const canonical = Buffer.from(formatted.bytes).toString('utf8');
  const tree = await runner.run(database, `EXPLAIN AST ${canonical}`, { format: 'TabSeparated', params });
  refuseUnsafe(parseAst(Buffer.from(tree.bytes).toString('utf8')));
  // The formatter ends a statement's text with its FORMAT clause on a line of its own.
  const format = /\nFORMAT (\w+)$/.exec(canonical)?.[1];
  return { sql: canonical, format };
}

function parseAst(text: string): AstNode[] {
  return text.split('\n').filter(Boolean).map((line) => {
    const [type = '', name = ''] = line.trimStart().split(' ');
    return { depth: line.length - line.trimStart().length, type, name };
  });
}

function refuseUnsafe(nodes: AstNode[]): void {
  const [statement, explained] = nodes;
  if (!statement || !isReading(statement.type) || (statement.type === 'Explain' && explained?.type !== 'SelectWithUnionQuery')) {
    throw ClickHouseException.of('READONLY', READ_ONLY);
  }
  for (const [i, node] of nodes.entries()) {
    if (node.type === 'Set') {
      throw ClickHouseException.of('READONLY', 'Cannot modify settings in readonly mode: a SETTINGS clause is not allowed here (the settings the endpoint takes go in URL parameters)');
    }
    // A literal right under the statement is its INTO OUTFILE file (or that file's COMPRESSION).
    if (node.type === 'Literal' && node.depth === 1) throw ClickHouseException.of('READONLY', 'INTO OUTFILE is not allowed here');
    if (node.type !== 'Function') continue;
    const isTableFunction = nodes[i - 1]?.type === 'TableExpression' && nodes[i - 1]!.depth === node.depth - 1;
    if (isTableFunction ? !TABLE_FUNCTIONS.has(node.name.toLowerCase()) : FUNCTIONS_REFUSED.has(node.name.toLowerCase())) {
      throw ClickHouseException.of('ACCESS_DENIED', `Not enough privileges: ${isTableFunction ? 'table function' : 'function'} ${node.name} is not allowed here`);
    }
  }
}

function isReading(type: string): boolean {
  return type === 'SelectWithUnionQuery' || type === 'DescribeQuery' || type === 'Explain' || type.startsWith('Show') || type.startsWith('Exists');
}

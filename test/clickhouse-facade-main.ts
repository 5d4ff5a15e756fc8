/**
 * Entry of the ClickHouse facade process (test/clickhouse-facade.ts):
 *   node --import tsx test/clickhouse-facade-main.ts <dataDir> [port]
 * Prints {"port": N} on stdout once it listens; SIGTERM closes chDB and exits.
 */
import { serveClickhouseFacade } from './clickhouse-facade.ts';

const [dataDir, port] = process.argv.slice(2);
if (!dataDir) {
  process.stderr.write('usage: clickhouse-facade-main.ts <dataDir> [port]\n');
  process.exit(2);
}
const facade = await serveClickhouseFacade(dataDir, Number(port ?? 0));
process.stdout.write(JSON.stringify({ port: facade.port }) + '\n');
process.once('SIGTERM', () => {
  void facade.close().finally(() => process.exit(0));
});

import { describe, expect, it } from 'vitest';
import type { RelayAdmin } from './admin/index.ts';
import { runOperatorCommand } from './operator.ts';
import type { RelayStore } from './store.ts';

describe('runOperatorCommand', () => {
  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty', 'nothing'])('refuses %s as an unknown command', async (command) => {
    await expect(runOperatorCommand({} as RelayAdmin, {} as RelayStore, command, {})).rejects.toThrow(`unknown relay command: ${command}`);
  });
});

/**
 * The commands of the `sluice` command line: commander's, with what commander leaves out.
 * A value option is given at most once (commander would keep the last of two silently), a
 * required one must be there and non-empty, and every usage mistake is one line on stderr
 * naming the command and its help, with exit code 2.
 */
import { Command, CommanderError, Option, type ErrorOptions, type Help } from 'commander';

/** The exit code of a usage mistake, as for most Unix tools (grep, diff, ls) and the shell's builtins. */
export const USAGE_EXIT_CODE = 2;

/** Help is laid out for this many columns at most, fewer on a narrower terminal. */
export const HELP_WIDTH = 80;
/** The term column of help lists; a longer term gets lines of its own, its description under it. */
const TERM_COLUMN = 26;
const INDENT = 2;
const SPACER = 2;

/** A command's synopsis after `Usage: `, its further lines under the first's start. */
export function wrapUsage(synopsis: string, helper: Help): string {
  const prefix = 'Usage: '.length;
  return helper.boxWrap(synopsis, (helper.helpWidth ?? HELP_WIDTH) - prefix).replace(/\n/g, `\n${' '.repeat(prefix)}`);
}

/**
 * One entry of a help list (a command, an option, a setting) within the help's width, where
 * commander would put every description after the longest term (column 73 for `demo`'s options).
 */
export function formatHelpItem(term: string, description: string, helper: Help): string {
  const width = helper.helpWidth ?? HELP_WIDTH;
  const column = INDENT + TERM_COLUMN + SPACER;
  const indent = ' '.repeat(INDENT);
  if (!description) return indent + term;
  const text = helper.boxWrap(description, width - column).replace(/\n/g, `\n${' '.repeat(column)}`);
  if (helper.displayWidth(term) <= TERM_COLUMN) return indent + term.padEnd(TERM_COLUMN + SPACER) + text;
  // A long term wraps on its own lines (continued further in), the description below it.
  const wrappedTerm = helper.boxWrap(term, width - INDENT - 2).replace(/\n/g, `\n${indent}  `);
  return `${indent}${wrappedTerm}\n${' '.repeat(column)}${text}`;
}

export class SluiceCommand extends Command {
  private readonly required = new Set<Option>();
  private readonly repeatable = new Set<Option>();

  override createCommand(name?: string): SluiceCommand {
    return new SluiceCommand(name);
  }

  /** `--flag <VALUE>`, at most once; a `required` one must be given, and not empty. */
  value(flags: string, description: string, { required = false } = {}): this {
    const option = new Option(flags, description);
    option.argParser((value: string, previous: string | undefined) => {
      if (previous !== undefined) this.error(`${option.long} given twice`);
      return this.checkValue(option, value);
    });
    if (required) this.required.add(option);
    return this.addOption(option);
  }

  /** `--flag <VALUE>` that may be repeated: every value, in order. */
  values(flags: string, description: string): this {
    const option = new Option(flags, description);
    option.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), this.checkValue(option, value)]);
    this.repeatable.add(option);
    return this.addOption(option);
  }

  isRequired(option: Option): boolean {
    return this.required.has(option);
  }

  /**
   * The options this command needs are there: checked once the command line is whole, so a
   * misspelt flag is reported as such (`unknown option '--nmae'`), not as a missing `--name`.
   */
  checkRequired(): void {
    for (const option of this.required) {
      if (!this.getOptionValue(option.attributeName())) this.error(`missing ${option.long}`);
    }
  }

  /** The command as typed: `sluice sources create`. */
  path(): string {
    return this.parent ? `${(this.parent as SluiceCommand).path()} ${this.name()}` : this.name();
  }

  /** What follows the parent's words: `create --name <NAME> [--key <KEY>]`, `sources <command>`, `query <sql>`. */
  usageTerm(): string {
    if (this.commands.length) return `${this.name()} <command>`;
    const options = this.options.map((option) => {
      if (this.isRequired(option)) return option.flags;
      return `[${option.flags}${this.repeatable.has(option) ? '...' : ''}]`;
    });
    const args = this.registeredArguments.map((arg) => {
      const name = arg.name() + (arg.variadic ? '...' : '');
      return arg.required ? `<${name}>` : `[${name}]`;
    });
    return [this.name(), ...options, ...args].join(' ');
  }

  /** The whole command line: `sluice sources create --name <NAME>`. */
  synopsis(): string {
    return this.parent ? `${(this.parent as SluiceCommand).path()} ${this.usageTerm()}` : this.usageTerm();
  }

  /** Every usage mistake, commander's and ours: one line to stderr, then exit code 2. */
  override error(message: string, options?: ErrorOptions): never {
    const line = message.replace(/^error: /, '').replace(/\n\(Did you mean (.+)\)$/, '; did you mean $1').replace(/\s*\n\s*/g, ' ');
    return super.error(`${this.path()}: ${line} (see \`${this.path()} --help\`)`, { code: 'sluice.usage', ...options, exitCode: USAGE_EXIT_CODE });
  }

  /**
   * A value that looks like an option was not meant as a value: `--name --help` asks for
   * help, it does not name something "--help". (`-` alone is stdin, for the file options.)
   */
  private checkValue(option: Option, value: string): string {
    if (value.length > 1 && value.startsWith('-')) this.error(`${option.long} needs a value, not '${value}'`);
    return value;
  }
}

/** The exit code for what commander threw: help asked for is 0, help shown for lack of a command is a usage mistake. */
export function commanderExitCode(err: CommanderError): number {
  return err.code === 'commander.help' && err.exitCode !== 0 ? USAGE_EXIT_CODE : err.exitCode;
}

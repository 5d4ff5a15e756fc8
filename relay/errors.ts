/**
 * The relay's errors: every one answers `{ "message": string, "statusCode": integer }` (the
 * relay spec's shape), with extra fields where they help (the field of a validation error).
 */
import { ApiError } from '../core/errors.ts';

export class RelayError extends ApiError {
  override name = 'RelayError';
}

/**
 * 400 whose message starts with `Validation failed` and names the field and the problem
 * (`Validation failed: data.meta.note must be at most 10000 characters`); `field` repeats it.
 */
export function validationFailed(field: string, problem: string): RelayError {
  return new RelayError(400, `Validation failed: ${field} ${problem}`, { field, errors: [{ field, message: problem }] });
}

/** 404: used for anything of another tenant as well, so its existence does not leak. */
export function notFound(what: string): RelayError {
  return new RelayError(404, `${what} not found`);
}

export const unauthorized = (message = 'Unauthorized') => new RelayError(401, message);
export const forbidden = (message: string) => new RelayError(403, message);
export const conflict = (message: string) => new RelayError(409, message);

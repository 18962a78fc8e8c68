// The one error type of the client: every refusal of the daemon, and every
// answer the client itself refuses, says what happened and whether anything
// ran.

/** The daemon's error codes (proto Error.Code, lower case), and the client's own. */
export type BulkheadErrorCode =
  // from the daemon
  | "invalid_request"
  | "unsupported"
  | "disabled"
  | "at_capacity"
  | "not_found"
  | "session_ended"
  | "floor_not_met"
  | "internal"
  // from the client
  | "connect_failed" // nothing was sent
  | "frame_too_large" // refused before sending, or an answer over the limit
  | "connection_lost" // the answer never came: the fate of the request is unknown
  | "timeout" // no answer in time: the fate of the request is unknown
  | "protocol" // an answer that does not parse or does not match the request
  | "tier_below_floor" // an answer whose tier is below the floor asked for
  | "chain_broken"; // a run record that does not chain to the session's last one

/** Why a session ended (proto Error.Ended, lower case). */
export type EndedReason =
  | "idle"
  | "lifetime"
  | "closed"
  | "evicted"
  | "disk_budget"
  | "sandbox_died"
  | "shutdown";

export class BulkheadError extends Error {
  readonly code: BulkheadErrorCode;
  /** Only at_capacity (and a connect that failed) may be retried as is. */
  readonly retryable: boolean;
  /** True when nothing ran: the request never reached a sandbox. */
  readonly notDispatched: boolean;
  readonly endedReason?: EndedReason;

  constructor(
    code: BulkheadErrorCode,
    message: string,
    opts: { retryable?: boolean; notDispatched: boolean; endedReason?: EndedReason },
  ) {
    super(message);
    this.name = "BulkheadError";
    this.code = code;
    this.retryable = opts.retryable ?? false;
    this.notDispatched = opts.notDispatched;
    this.endedReason = opts.endedReason;
  }
}

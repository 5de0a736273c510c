'use strict';
// Exceptions mapped from agentrt's status codes: one class per code, all subclasses of AgentrtError.
const { STATUS, fns } = require('./capi');

class AgentrtError extends Error {
  constructor(message, code = STATUS.E_INTERNAL) {
    super(message);
    this.name = this.constructor.name;
    this.code = code; // the negative status
    this.status = fns.agentrt_status_name(code); // "not_found", ...
  }
}

function errorClass(name, code) {
  const cls = class extends AgentrtError {
    constructor(message, c = code) {
      super(message, c);
    }
  };
  Object.defineProperty(cls, 'name', { value: name });
  return cls;
}

const InvalidArgument = errorClass('InvalidArgument', STATUS.E_INVALID_ARGUMENT);
const NotFound = errorClass('NotFound', STATUS.E_NOT_FOUND);
const Conflict = errorClass('Conflict', STATUS.E_CONFLICT);
const Expired = errorClass('Expired', STATUS.E_EXPIRED);
const TooLarge = errorClass('TooLarge', STATUS.E_TOO_LARGE);
const Cancelled = errorClass('Cancelled', STATUS.E_CANCELLED);
const Timeout = errorClass('Timeout', STATUS.E_TIMEOUT);
const IOFailure = errorClass('IOFailure', STATUS.E_IO);
const InvalidState = errorClass('InvalidState', STATUS.E_INVALID_STATE);
const ModelError = errorClass('ModelError', STATUS.E_MODEL);
const Unauthorized = errorClass('Unauthorized', STATUS.E_UNAUTHORIZED);
const Unsupported = errorClass('Unsupported', STATUS.E_UNSUPPORTED);
const InternalError = errorClass('InternalError', STATUS.E_INTERNAL);

const BY_CODE = new Map([InvalidArgument, NotFound, Conflict, Expired, TooLarge, Cancelled, Timeout, IOFailure,
  InvalidState, ModelError, Unauthorized, Unsupported, InternalError].map((c) => [new c('').code, c]));

// The error for a status. Without a message, the calling thread's last-error message (valid only right after a
// synchronous call: an .async call runs on a worker thread whose message the main thread cannot read).
function errorFor(code, message) {
  const text = message ?? fns.agentrt_last_error();
  const cls = BY_CODE.get(code);
  return cls ? new cls(text || fns.agentrt_status_name(code)) : new AgentrtError(text || `agentrt status ${code}`, code);
}

function check(code) {
  if (code !== STATUS.OK) throw errorFor(code);
}

module.exports = {
  AgentrtError, InvalidArgument, NotFound, Conflict, Expired, TooLarge, Cancelled, Timeout, IOFailure, InvalidState,
  ModelError, Unauthorized, Unsupported, InternalError, errorFor, check,
};

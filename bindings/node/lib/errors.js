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

// The class of each status, by its STATUS key: a subclass of AgentrtError named so.
const CLASS_NAMES = {
  E_INVALID_ARGUMENT: 'InvalidArgument',
  E_NOT_FOUND: 'NotFound',
  E_CONFLICT: 'Conflict',
  E_EXPIRED: 'Expired',
  E_TOO_LARGE: 'TooLarge',
  E_CANCELLED: 'Cancelled',
  E_TIMEOUT: 'Timeout',
  E_IO: 'IOFailure',
  E_INVALID_STATE: 'InvalidState',
  E_MODEL: 'ModelError',
  E_UNAUTHORIZED: 'Unauthorized',
  E_UNSUPPORTED: 'Unsupported',
  E_INTERNAL: 'InternalError',
};

function errorClass(name, code) {
  const cls = class extends AgentrtError {
    constructor(message, c = code) {
      super(message, c);
    }
  };
  Object.defineProperty(cls, 'name', { value: name });
  return cls;
}

const classes = {};
const BY_CODE = new Map();
for (const [key, name] of Object.entries(CLASS_NAMES)) {
  classes[name] = errorClass(name, STATUS[key]);
  BY_CODE.set(STATUS[key], classes[name]);
}

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

module.exports = { AgentrtError, ...classes, errorFor, check };

export * from "./call.js";
export { Cscp, type CscpOptions } from "./cscp.js";
export { CscpApi } from "./api.js";
export { CscpSaver, type CscpSaverOptions } from "./saver.js";
export { CscpStore, type CscpStoreOptions, type CscpTTLConfig } from "./store.js";
export { CscpSession, type CscpSessionOptions, type SessionItem } from "./session.js";

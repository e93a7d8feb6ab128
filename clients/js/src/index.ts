export * from "./call.js";
export { Cscp, type CscpOptions } from "./cscp.js";
export { CscpApi } from "./api.js";
export { CscpSaver, type CscpSaverOptions } from "./saver.js";

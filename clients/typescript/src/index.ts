export * from "./client.js";
export * from "./errors.js";
export { recordDigest } from "./digest.js";

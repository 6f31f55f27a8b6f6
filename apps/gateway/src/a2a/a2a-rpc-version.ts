/**
 * The protocol version a JSON-RPC call speaks: its `A2A-Version` header when present (a v1.0 name with `0.3` stays
 * refused -32601, a v0.3 name with `1.0` too); without one, the method's name tells it: v0.3's names are
 * `category/action` (`message/send`, `tasks/get`, ...), v1.0's have no slash (`SendMessage`, `GetTask`, ...), so a
 * name without a slash is read as 1.0 and any other as 0.3 (the specification's reading of an absent header). Clients
 * such as the A2A TCK send v1.0 names without the header; reading them as 0.3 would answer -32601 to a call whose
 * version is not in doubt. An unknown name is -32601 in either version.
 */
export function rpcVersionOf(header: string | undefined, method: string): string {
  return header ?? (method.includes('/') ? '0.3' : '1.0');
}

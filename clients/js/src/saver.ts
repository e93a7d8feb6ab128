// CscpSaver: LangGraph's checkpointer on cscp (cscp.checkpoint_* in src/sql/checkpoint.sql).
// The rules (tenant, TTL, deletes, only changed channels kept) are the database's; this class
// only serialises with LangGraph's serde and maps rows to tuples.
import { createHash, randomInt } from "node:crypto";
import pg from "pg";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  getCheckpointId,
  maxChannelVersion,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { CscpError, inTransaction, tenantQuery, type Query } from "./call.js";

export interface CscpSaverOptions {
  /** The tenant every thread of this saver belongs to. */
  tenant: string;
  /** LangGraph's serializer (default: its JsonPlusSerializer). */
  serde?: SerializerProtocol;
  /**
   * Bytes of serialised channel values the saver keeps to read them without the database
   * sending them again (default 64 MiB; 0: none).  See ValueCache.
   */
  cacheBytes?: number;
}

interface TupleRow extends Record<string, unknown> {
  thread: string;
  ns: string;
  id: string;
  parent_id: string | null;
  checkpoint: Record<string, unknown>;
  metadata: Record<string, unknown>;
  json_values: string | null;
  json_key_sizes: number[] | null;
  json_sizes: number[] | null;
  held: string[] | null;
  blob_channels: string[] | null;
  blob_types: string[] | null;
  blobs: (Buffer | null)[] | null;
  write_task_ids: string[];
  write_channels: string[];
  write_types: string[];
  write_blobs: (Buffer | null)[];
}

// The values of type json come as one JSON object of channel to value, parsed once (a list
// of bytea would be parsed character by character by the driver), with the byte sizes of each
// key and value in it (json_key_sizes, json_sizes) to cut it into values for the cache; the
// others one by one.  held: the channels whose value the database did not send (NULL blobs: a
// value the saver said it holds).  One scan of the blobs makes them all, in the arrays' order.
const JSON_KEY = "pg_catalog.to_json(u.c)::text";
const JSON_SENT = "FILTER (WHERE u.t = 'json' AND u.b IS NOT NULL)";
const OTHER_SENT = "FILTER (WHERE u.t <> 'json' AND u.b IS NOT NULL)";
/** The SELECT of tuple rows from `from`, a call of a function returning checkpoint_list's rows. */
const tupleSql = (from: string) =>
  "SELECT g.thread, g.ns, g.id, g.parent_id, g.checkpoint, g.metadata, '{' || a.json_values || '}' AS json_values, " +
  "a.json_key_sizes, a.json_sizes, a.held, a.blob_channels, a.blob_types, a.blobs, " +
  `g.write_task_ids, g.write_channels, g.write_types, g.write_blobs FROM ${from} g CROSS JOIN LATERAL (SELECT ` +
  `pg_catalog.string_agg(${JSON_KEY} || ':' || pg_catalog.convert_from(u.b, 'UTF8'), ',') ${JSON_SENT} AS json_values, ` +
  `pg_catalog.array_agg(pg_catalog.octet_length(${JSON_KEY})) ${JSON_SENT} AS json_key_sizes, ` +
  `pg_catalog.array_agg(pg_catalog.octet_length(u.b)) ${JSON_SENT} AS json_sizes, ` +
  "pg_catalog.array_agg(u.c) FILTER (WHERE u.b IS NULL) AS held, " +
  `pg_catalog.array_agg(u.c) ${OTHER_SENT} AS blob_channels, pg_catalog.array_agg(u.t) ${OTHER_SENT} AS blob_types, ` +
  `pg_catalog.array_agg(u.b) ${OTHER_SENT} AS blobs ` +
  "FROM ROWS FROM (pg_catalog.unnest(g.blob_channels), pg_catalog.unnest(g.blob_types), pg_catalog.unnest(g.blobs)) u (c, t, b)) a";

const decoder = new TextDecoder();

/** The whole serialised value of a channel this saver last wrote, the base of its next extension. */
interface Written {
  version: string;
  bytes: Buffer;
  digest: Buffer;
  depth: number;
}

/** How many values the saver remembers (one per thread, namespace and channel, newest kept). */
const WRITTEN_MAX = 1024;
/** How many extensions a value may follow before the whole value is stored again. */
const DEPTH_MAX = 32;
/** The random part of a channel version: RANDOM_CHARS base-62 digits. */
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const RANDOM_CHARS = 6;
const RANDOM_RANGE = 62 ** RANDOM_CHARS;
const COMMA = 0x2c;
const OPEN = 0x5b;
const CLOSE = 0x5d;

const sha256 = (...parts: Buffer[]) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest();
};

/**
 * The elements that bytes (a JSON array) adds to base's (a non-empty JSON array it starts
 * with), as a JSON array; undefined unless bytes is base's array with elements appended.
 */
function appended(base: Buffer, bytes: Buffer): Buffer | undefined {
  const n = base.length;
  if (n <= 2 || bytes.length <= n || base[0] !== OPEN || base[n - 1] !== CLOSE ||
    bytes[bytes.length - 1] !== CLOSE || bytes[n - 1] !== COMMA) return undefined;
  if (base.compare(bytes, 0, n - 1, 0, n - 1) !== 0) return undefined;
  const delta = Buffer.allocUnsafe(bytes.length - n + 1);
  delta[0] = OPEN;
  bytes.copy(delta, 1, n);
  return delta;
}

/** A serialised channel value as LangGraph's serde made it. */
interface Held {
  type: string;
  bytes: Uint8Array;
}

/** What a read names of the values the saver holds: the pairs for the database, the values. */
interface HeldSet {
  channels: string[];
  versions: string[];
  values: Map<string, Held>;
}

/**
 * Per thread, namespace and channel, how many versions the cache keeps (the newest set): a read
 * of the thread's head names the last ones written, and older versions (of a list that grows a
 * version per turn) would only crowd other threads out.
 */
const HELD_PER_CHANNEL = 4;
/** What a value costs the cache beyond its bytes (its key, its entry). */
const ENTRY_COST = 256;
const NUL = "\u0000";

/**
 * A bounded cache (least recently used out first, by bytes) of the serialised channel values a
 * saver wrote or read, keyed by thread, namespace, channel and version.  A version names one
 * value for as long as the thread lives (cscp.checkpoint_put refuses another value for a stored
 * version), and only versions with a random part ("<counter>.<random>", a new one per fork and
 * per write) are kept, so that a thread deleted and written again under versions that only
 * count is never read from here.  The database stays the judge: a read names the versions held,
 * and a value is taken from here only for a channel the database returns for this tenant's live
 * thread at that version.  Values are kept serialised and loaded on each read, so every tuple
 * holds fresh objects, whatever a graph does to the ones it was given.
 */
class ValueCache {
  private readonly entries = new Map<string, Held & { thread: string; channel: string; version: string }>();
  private readonly byThread = new Map<string, Map<string, string[]>>();
  private size = 0;

  constructor(private readonly maxBytes: number) {}

  static cacheable(version: string): boolean {
    return version.includes(".");
  }

  get(thread: string, channel: string, version: string): Held | undefined {
    return this.entries.get(thread + NUL + channel + NUL + version);
  }

  set(thread: string, channel: string, version: string, value: Held): void {
    const cost = value.bytes.byteLength + ENTRY_COST;
    if (cost > this.maxBytes || !ValueCache.cacheable(version)) return;
    const key = thread + NUL + channel + NUL + version;
    const old = this.entries.get(key);
    if (old) {
      this.entries.delete(key);
      this.entries.set(key, old);
      return;
    }
    this.entries.set(key, { ...value, thread, channel, version });
    this.size += cost;
    let channels = this.byThread.get(thread);
    if (!channels) this.byThread.set(thread, channels = new Map());
    const versions = channels.get(channel);
    if (!versions) channels.set(channel, [version]);
    else {
      versions.push(version);
      if (versions.length > HELD_PER_CHANNEL) this.evict(thread + NUL + channel + NUL + versions[0]);
    }
    while (this.size > this.maxBytes) this.evict(this.entries.keys().next().value!);
  }

  /** The values held of a thread's namespace (thread: thread id NUL namespace). */
  held(thread: string): HeldSet | undefined {
    const channels = this.byThread.get(thread);
    if (!channels) return undefined;
    const set: HeldSet = { channels: [], versions: [], values: new Map() };
    for (const [channel, versions] of channels) {
      for (let i = 0; i < versions.length; i++) {
        const key = thread + NUL + channel + NUL + versions[i];
        const value = this.entries.get(key)!;
        this.entries.delete(key);
        this.entries.set(key, value);
        set.channels.push(channel);
        set.versions.push(versions[i]);
        set.values.set(channel + NUL + versions[i], value);
      }
    }
    return set;
  }

  /** Forget every value of a thread, in every namespace. */
  deleteThread(threadId: string): void {
    const prefix = threadId + NUL;
    for (const [thread, channels] of [...this.byThread]) {
      if (!thread.startsWith(prefix)) continue;
      for (const [channel, versions] of [...channels]) {
        for (const version of [...versions]) this.evict(thread + NUL + channel + NUL + version);
      }
    }
  }

  private evict(key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    this.size -= e.bytes.byteLength + ENTRY_COST;
    const channels = this.byThread.get(e.thread)!;
    const versions = channels.get(e.channel)!;
    versions.splice(versions.indexOf(e.version), 1);
    if (versions.length === 0) channels.delete(e.channel);
    if (channels.size === 0) this.byThread.delete(e.thread);
  }
}

/** The counter of a channel version: 0 for none; a number, or the digits before a string's ".". */
function versionCounter(current: unknown): number {
  const counter = current === undefined ? 0
    : typeof current === "number" ? current
    : typeof current === "string" ? Number(/^[a-p]?(\d+)(\.|$)/.exec(current)?.[1] ?? Number.NaN)
    : Number.NaN;
  if (!Number.isSafeInteger(counter) || counter < 0 || counter >= Number.MAX_SAFE_INTEGER) {
    throw new TypeError(`cannot continue channel version ${JSON.stringify(current)}: it is not a counter`);
  }
  return counter;
}

/** A checkpointer whose threads live in cscp, bound to one tenant. */
export class CscpSaver extends BaseCheckpointSaver {
  readonly pool: pg.Pool;
  readonly tenant: string;
  private readonly ownsPool: boolean;
  /** Per thread, namespace and channel: the value last written, which a longer list extends. */
  private readonly written = new Map<string, Written>();
  /** Serialised values written or read, which reads name so as not to be sent them again. */
  private readonly cache: ValueCache | undefined;

  constructor(pool: pg.Pool, options: CscpSaverOptions, ownsPool = false) {
    super(options.serde);
    if (!options || typeof options.tenant !== "string" || options.tenant === "") {
      throw new TypeError("CscpSaver needs a tenant: new CscpSaver(pool, { tenant: \"acme\" })");
    }
    this.pool = pool;
    this.tenant = options.tenant;
    this.ownsPool = ownsPool;
    const cacheBytes = options.cacheBytes ?? 64 * 1024 * 1024;
    if (typeof cacheBytes !== "number" || !(cacheBytes >= 0)) {
      throw new TypeError("CscpSaver's cacheBytes must be a number of bytes, 0 for no cache");
    }
    this.cache = cacheBytes > 0 ? new ValueCache(cacheBytes) : undefined;
  }

  /** A saver on a pool of its own, which end() closes. */
  static fromConnString(connectionString: string, options: CscpSaverOptions): CscpSaver {
    return new CscpSaver(new pg.Pool({ connectionString }), options, true);
  }

  /** Check that cscp, with its checkpoint functions, is installed in the database. */
  async setup(): Promise<void> {
    const rows = await this.run((q) => q<{ version: string | null; ok: boolean }>(
      "SELECT (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'cscp') AS version," +
      " pg_catalog.to_regprocedure('cscp.checkpoint_put(text,text,text,text,text,jsonb,jsonb,text[],text[],text[],bytea[],text[],bytea[])') IS NOT NULL AS ok"));
    if (!rows[0]?.version) {
      throw new CscpError("extension \"cscp\" is not installed", "42704", undefined,
        "Run CREATE EXTENSION cscp in this database (as a superuser), then grant the application role with cscp.grant_app.");
    }
    if (!rows[0].ok) {
      throw new CscpError(`extension "cscp" ${rows[0].version} has no checkpoint functions`, "42883", undefined,
        "Run ALTER EXTENSION cscp UPDATE to reach version 0.2.0 or later.");
    }
  }

  /** Close the pool when this saver made it. */
  async end(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }

  /**
   * The version a changed channel gets: "<counter>.<random>", as LangGraph's Python
   * PostgresSaver makes them.  Two checkpoints forked from one parent (updateState on an older
   * checkpoint, a replay, two writers) give a channel the same counter; the random part (six
   * letters or digits: 35.7 bits, more than 8 hex digits' 32 in 2 bytes less) keeps their values apart, since a channel's value is stored once per version (and the
   * database refuses another value for a version it holds).  The counter is written as its
   * number of digits (a letter, a for 1 to p for 16) and its digits, so that versions compare
   * as strings in the order of their counters (LangGraph compares them with < and
   * localeCompare) and stay short: they are stored in every checkpoint's channel_versions and
   * versions_seen.  A number (an older saver's counter) or a zero-padded counter (the Python
   * saver's) is continued from.  The signature stays BaseCheckpointSaver<number>'s, the type
   * StateGraph.compile takes; LangGraph's runtime handles string versions.
   */
  override getNextVersion(current: number | undefined): number {
    const counter = versionCounter(current);
    const digits = String(counter + 1);
    let n = randomInt(0, RANDOM_RANGE);
    let random = "";
    for (let i = 0; i < RANDOM_CHARS; i++, n = Math.floor(n / 62)) random += BASE62[n % 62];
    return `${String.fromCharCode(0x60 + digits.length)}${digits}.${random}` as unknown as number;
  }

  private run<T>(fn: (q: Query) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, this.tenant, fn);
  }

  private async dumpJson(value: unknown): Promise<string> {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    if (type !== "json") throw new TypeError(`cannot store a ${type} value as JSON`);
    return decoder.decode(bytes);
  }

  private async loadJson(value: unknown): Promise<any> {
    return this.serde.loadsTyped("json", JSON.stringify(value));
  }

  /**
   * A row as a tuple.  held: what the read named as held, whose values fill the channels the
   * database returned without a blob; without it (or for a value not there) such a channel is
   * read as a stored NULL was before: a json one is absent, another loaded from no bytes.
   */
  private async toTuple(row: TupleRow, held?: HeldSet): Promise<CheckpointTuple> {
    const channelValues: Record<string, unknown> = row.json_values === null ? {}
      : await this.serde.loadsTyped("json", row.json_values);
    const versions = (row.checkpoint.channel_versions ?? {}) as Record<string, unknown>;
    const thread = row.thread + NUL + row.ns;
    if (this.cache && row.json_values !== null && row.json_sizes !== null && row.json_key_sizes !== null) {
      // The JSON object is {key:value,...}: each value's bytes, kept for the next read.
      const bytes = Buffer.from(row.json_values);
      let pos = 1;
      for (let i = 0; i < row.json_sizes.length; i++) {
        pos += row.json_key_sizes[i];
        const key = JSON.parse(bytes.toString("utf8", pos - row.json_key_sizes[i], pos)) as string;
        pos += 1;
        const end = pos + row.json_sizes[i];
        this.cache.set(thread, key, String(versions[key]), { type: "json", bytes: Buffer.from(bytes.subarray(pos, end)) });
        pos = end + 1;
      }
    }
    const blobChannels = row.blob_channels ?? [];
    for (let i = 0; i < blobChannels.length; i++) {
      const bytes = row.blobs![i] ?? new Uint8Array();
      channelValues[blobChannels[i]] = await this.serde.loadsTyped(row.blob_types![i], bytes);
      this.cache?.set(thread, blobChannels[i], String(versions[blobChannels[i]]), { type: row.blob_types![i], bytes });
    }
    for (const channel of row.held ?? []) {
      const value = held?.values.get(channel + NUL + String(versions[channel]));
      if (value) channelValues[channel] = await this.serde.loadsTyped(value.type, value.bytes);
    }
    const stored = await this.loadJson(row.checkpoint);
    const checkpoint = { ...stored, channel_values: channelValues } as Checkpoint;
    if (checkpoint.v < 4 && row.parent_id !== null) await this.migratePendingSends(checkpoint, row);
    const pendingWrites: CheckpointPendingWrite[] = [];
    for (let i = 0; i < row.write_task_ids.length; i++) {
      pendingWrites.push([row.write_task_ids[i], row.write_channels[i],
        await this.serde.loadsTyped(row.write_types[i], row.write_blobs[i] ?? new Uint8Array())]);
    }
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: row.thread, checkpoint_ns: row.ns, checkpoint_id: row.id } },
      checkpoint,
      metadata: (await this.loadJson(row.metadata)) as CheckpointMetadata,
      pendingWrites,
    };
    if (row.parent_id !== null) {
      tuple.parentConfig = { configurable: { thread_id: row.thread, checkpoint_ns: row.ns, checkpoint_id: row.parent_id } };
    }
    return tuple;
  }

  /**
   * A checkpoint of format < 4 kept its pending sends as writes to TASKS on its parent: they
   * become the value of the TASKS channel, as LangGraph's own savers read them.
   */
  private async migratePendingSends(checkpoint: Checkpoint, row: TupleRow): Promise<void> {
    const parents = await tenantQuery<TupleRow>(this.pool, this.tenant,
      tupleSql("cscp.checkpoint_get_tuple(s.t, $2, $3, $4)"), [row.thread, row.ns, row.parent_id]);
    const sends: unknown[] = [];
    const parent = parents[0];
    if (parent) {
      for (let i = 0; i < parent.write_channels.length; i++) {
        if (parent.write_channels[i] === TASKS) {
          sends.push(await this.serde.loadsTyped(parent.write_types[i], parent.write_blobs[i] ?? new Uint8Array()));
        }
      }
    }
    (checkpoint.channel_values as Record<string, unknown>)[TASKS] = sends;
    const versions = Object.values(checkpoint.channel_versions ?? {});
    checkpoint.channel_versions = { ...checkpoint.channel_versions,
      [TASKS]: versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined) };
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined) return undefined;
    const ns = config.configurable?.checkpoint_ns ?? "";
    const id = getCheckpointId(config) || null;
    const held = this.cache?.held(String(threadId) + NUL + ns);
    const rows = await tenantQuery<TupleRow>(this.pool, this.tenant,
      tupleSql("cscp.checkpoint_get_tuple(s.t, $2, $3, $4, $5::text[], $6::text[])"),
      [String(threadId), ns, id, held?.channels ?? null, held?.versions ?? null], "cscp_checkpoint_get_tuple");
    return rows.length ? this.toTuple(rows[0], held) : undefined;
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { limit, before, filter } = options ?? {};
    const threadId = config.configurable?.thread_id;
    const ns = config.configurable?.checkpoint_ns;
    const id = config.configurable?.checkpoint_id;
    const rows = await tenantQuery<TupleRow>(this.pool, this.tenant,
      tupleSql("cscp.checkpoint_list(s.t, $2, $3, $4, $5, $6::jsonb, $7)"),
      [threadId ?? null, ns ?? null, id ?? null, before?.configurable?.checkpoint_id ?? null,
        filter && Object.keys(filter).length ? JSON.stringify(filter) : null, limit ?? null]);
    for (const row of rows) yield await this.toTuple(row);
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined) {
      throw new TypeError("Failed to put checkpoint: the config's \"configurable\" has no \"thread_id\".");
    }
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const parent: string | null = config.configurable?.checkpoint_id ?? null;
    const { channel_values: values, ...rest } = checkpoint;
    const channels: string[] = [];
    const versions: string[] = [];
    const types: string[] = [];
    const whole: (Buffer | null)[] = [];
    for (const [channel, version] of Object.entries(newVersions)) {
      channels.push(channel);
      versions.push(String(version));
      if (values && Object.prototype.hasOwnProperty.call(values, channel)) {
        const [type, bytes] = await this.serde.dumpsTyped((values as Record<string, unknown>)[channel]);
        types.push(type);
        whole.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      } else {
        types.push("empty");
        whole.push(null);
      }
    }
    // A JSON list that extends the value this saver last wrote for the channel (LangGraph's
    // messages: a list that only grows) is sent as its new elements on that base.
    const keys = channels.map((c) => `${String(threadId)}\u0000${ns}\u0000${c}`);
    const blobs: (Buffer | null)[] = [];
    const bases: (string | null)[] = [];
    const baseDigests: (Buffer | null)[] = [];
    const next: (Written | undefined)[] = [];
    for (let i = 0; i < channels.length; i++) {
      const bytes = whole[i];
      const prev = this.written.get(keys[i]);
      const delta = bytes && types[i] === "json" && prev && prev.version !== versions[i] && prev.depth < DEPTH_MAX
        ? appended(prev.bytes, bytes) : undefined;
      if (delta && prev) {
        blobs.push(delta);
        bases.push(prev.version);
        baseDigests.push(prev.digest);
        next.push({ version: versions[i], bytes: bytes!, digest: sha256(prev.digest, delta), depth: prev.depth + 1 });
      } else {
        blobs.push(bytes);
        bases.push(null);
        baseDigests.push(null);
        next.push(bytes && types[i] === "json" && bytes[0] === OPEN
          ? { version: versions[i], bytes, digest: sha256(bytes), depth: 0 } : undefined);
      }
    }
    const [cp, md] = await Promise.all([this.dumpJson(rest), this.dumpJson(metadata)]);
    const sql = "SELECT cscp.checkpoint_put(s.t, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8::text[], $9::text[], $10::text[], $11::bytea[], $12::text[], $13::bytea[])";
    const head = [String(threadId), ns, checkpoint.id, parent, cp, md, channels, versions, types];
    const extended = bases.some((b) => b !== null);
    try {
      await tenantQuery(this.pool, this.tenant, sql,
        [...head, blobs, extended ? bases : null, extended ? baseDigests : null], "cscp_checkpoint_put");
    } catch (err) {
      // 55000: a base is not stored as this saver wrote it (the thread was deleted, expired,
      // or written by another process); the whole values are.
      if (!extended || !(err instanceof CscpError) || err.sqlstate !== "55000") throw err;
      for (let i = 0; i < channels.length; i++) {
        const bytes = whole[i];
        next[i] = bytes && types[i] === "json" && bytes[0] === OPEN
          ? { version: versions[i], bytes, digest: sha256(bytes), depth: 0 } : undefined;
      }
      await tenantQuery(this.pool, this.tenant, sql, [...head, whole, null, null], "cscp_checkpoint_put");
    }
    for (let i = 0; i < channels.length; i++) {
      this.written.delete(keys[i]);
      const w = next[i];
      if (w) this.written.set(keys[i], w);
      const bytes = whole[i];
      if (bytes) this.cache?.set(String(threadId) + NUL + ns, channels[i], versions[i], { type: types[i], bytes });
    }
    while (this.written.size > WRITTEN_MAX) this.written.delete(this.written.keys().next().value!);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = config.configurable?.thread_id;
    const id = config.configurable?.checkpoint_id;
    if (threadId === undefined) throw new TypeError("Failed to put writes: the config's \"configurable\" has no \"thread_id\".");
    if (id === undefined) throw new TypeError("Failed to put writes: the config's \"configurable\" has no \"checkpoint_id\".");
    const channels: string[] = [];
    const types: string[] = [];
    const blobs: Buffer[] = [];
    const idxs: number[] = [];
    for (let i = 0; i < writes.length; i++) {
      const [channel, value] = writes[i];
      const [type, bytes] = await this.serde.dumpsTyped(value);
      channels.push(channel);
      types.push(type);
      blobs.push(Buffer.from(bytes));
      idxs.push(WRITES_IDX_MAP[channel] ?? i);
    }
    await tenantQuery(this.pool, this.tenant,
      "SELECT cscp.checkpoint_put_writes(s.t, $2, $3, $4, $5, $6, $7::text[], $8::text[], $9::bytea[], $10::int[])",
      [String(threadId), config.configurable?.checkpoint_ns ?? "", id, taskId, taskPath ?? "",
        channels, types, blobs, idxs], "cscp_checkpoint_put_writes");
  }

  async deleteThread(threadId: string): Promise<void> {
    const prefix = `${String(threadId)}\u0000`;
    for (const key of [...this.written.keys()]) if (key.startsWith(prefix)) this.written.delete(key);
    this.cache?.deleteThread(String(threadId));
    await tenantQuery(this.pool, this.tenant, "SELECT cscp.checkpoint_delete_thread(s.t, $2)", [String(threadId)]);
  }
}

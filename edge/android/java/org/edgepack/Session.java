package org.edgepack;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UnsupportedEncodingException;
import java.net.URLDecoder;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One edgepack model, ready to run: the plan (model.plan), its arena and the runtime's context.
 *
 * <p>All memory is Java's: the plan, the arena and the context are direct ByteBuffers allocated
 * here, 64-byte aligned (the native side allocates nothing). Inputs and outputs are direct
 * ByteBuffers holding the tensor's bytes in little-endian order, C layout. A Session is not
 * thread-safe; use one per thread.
 *
 * <pre>
 *   Session s = Session.load(assets.open("edgepack/model.plan"), assets.open("edgepack/io.txt"));
 *   ByteBuffer x = s.newInputBuffer(0);   x.asFloatBuffer().put(pixels);
 *   ByteBuffer[] y = s.run(x);            float[] logits = ...; y[0].asFloatBuffer().get(logits);
 * </pre>
 *
 * <p>Integrity: io.txt carries model.plan's SHA-256 (the manifest's hash of assets/edgepack/model.plan);
 * a load with io.txt refuses a plan whose bytes do not match it (EdgepackException, "SHA-256"). Without
 * io.txt ({@link #load(InputStream)}) nothing is checked.
 *
 * <p>Threads: {@link #setThreads} (or the {@code threads} argument of load) runs this session's plan on
 * N threads, the same partitioning as the threaded web build; outputs are the same for every N. The
 * workers are daemon Java threads (one pool per process, started once, asleep between runs) that enter
 * the library's pool; the thread calling run is thread 0.
 *
 * <p>A plan whose inputs have symbolic dims (plan version 2, {@link #hasDynamicShapes()}) runs at any
 * shape within its bounds ({@link #inputMin}, {@link #inputMax}): give data and dims together,
 * <pre>
 *   Session.Tensor[] y = s.run(Session.Tensor.ofFloats(ids, 1, 7));   // y[0].shape: resolved dims
 * </pre>
 * or call {@link #setInputShapes} first, after which {@link #inputInfo}/{@link #outputInfo} give this
 * shape's dims and sizes and {@link #run(ByteBuffer...)} works as for a fixed-shape plan. Changing the
 * shape re-plans the arena (a larger direct buffer when it needs more); the same shape again costs nothing.
 */
public final class Session implements AutoCloseable {
  static {
    System.loadLibrary("edgepack");
  }

  /** ONNX element types (TensorProto codes), as the plan stores them. */
  public static final int FLOAT = 1, UINT8 = 2, INT8 = 3, INT32 = 6, INT64 = 7, BOOL = 9, FLOAT16 = 10;
  /** Bits of {@link #cpuFeatures()}. */
  public static final int CPU_DOTPROD = 1, CPU_FP16 = 2, CPU_I8MM = 4;

  /** Name, element type, shape and byte size of one graph input or output. */
  public static final class TensorInfo {
    public final String name;
    public final int dtype;
    public final int[] shape;
    public final int byteSize;
    final int tensorId;

    TensorInfo(String name, int dtype, int[] shape, int byteSize, int tensorId) {
      this.name = name;
      this.dtype = dtype;
      this.shape = shape;
      this.byteSize = byteSize;
      this.tensorId = tensorId;
    }

    @Override
    public String toString() {
      return name + ": dtype " + dtype + " " + Arrays.toString(shape) + " (" + byteSize + " bytes)";
    }
  }

  /**
   * A tensor's bytes (direct, little-endian, C order) with its element type and dims: what
   * {@link #run(Tensor...)} takes and returns.
   */
  public static final class Tensor {
    public final int dtype;
    public final int[] shape;
    public final ByteBuffer data;

    /** {@code data}: exactly the tensor's bytes remaining; a heap buffer is copied into a direct one. */
    public Tensor(int dtype, int[] shape, ByteBuffer data) {
      long n = elementSize(dtype);
      for (int d : shape) {
        if (d < 0) throw new IllegalArgumentException("negative dimension in " + Arrays.toString(shape));
        n *= d;
      }
      if (data.remaining() != n)
        throw new IllegalArgumentException("tensor " + Arrays.toString(shape) + " of dtype " + dtype + " needs " + n
            + " bytes, got " + data.remaining());
      ByteBuffer b = data.slice();
      if (!b.isDirect()) {
        ByteBuffer d = allocateAligned(b.remaining(), ALIGN);
        d.put(b);
        d.clear();
        b = d;
      }
      this.dtype = dtype;
      this.shape = shape.clone();
      this.data = b.order(ByteOrder.LITTLE_ENDIAN);
    }

    public static Tensor ofFloats(float[] v, int... shape) {
      ByteBuffer b = allocateAligned(4 * v.length, ALIGN);
      b.asFloatBuffer().put(v);
      return new Tensor(FLOAT, shape, b);
    }

    public static Tensor ofLongs(long[] v, int... shape) {
      ByteBuffer b = allocateAligned(8 * v.length, ALIGN);
      b.asLongBuffer().put(v);
      return new Tensor(INT64, shape, b);
    }

    public static Tensor ofInts(int[] v, int... shape) {
      ByteBuffer b = allocateAligned(4 * v.length, ALIGN);
      b.asIntBuffer().put(v);
      return new Tensor(INT32, shape, b);
    }

    /** One-byte element types (UINT8, INT8, BOOL). */
    public static Tensor ofBytes(int dtype, byte[] v, int... shape) {
      ByteBuffer b = allocateAligned(v.length, ALIGN);
      b.put(v);
      b.clear();
      return new Tensor(dtype, shape, b);
    }

    public int numElements() {
      int n = 1;
      for (int d : shape) n *= d;
      return n;
    }

    public float[] toFloats() {
      float[] r = new float[numElements()];
      data.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(r);
      return r;
    }

    public long[] toLongs() {
      long[] r = new long[numElements()];
      data.duplicate().order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(r);
      return r;
    }

    public int[] toInts() {
      int[] r = new int[numElements()];
      data.duplicate().order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(r);
      return r;
    }

    @Override
    public String toString() {
      return "Tensor(dtype " + dtype + " " + Arrays.toString(shape) + ")";
    }
  }

  /** Bytes per element of an element type, or an IllegalArgumentException. */
  public static int elementSize(int dtype) {
    switch (dtype) {
      case UINT8: case INT8: case BOOL: return 1;
      case FLOAT16: return 2;
      case FLOAT: case INT32: return 4;
      case INT64: return 8;
      default: throw new IllegalArgumentException("unknown dtype " + dtype);
    }
  }

  /** The runtime refused the plan or a run; {@link #status} is the ep_status code. */
  public static final class EdgepackException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    public final int status;

    EdgepackException(String what, int status) {
      super(what + ": " + nStatusStr(status) + " (status " + status + ")");
      this.status = status;
    }

    /** Refused before the runtime saw the plan (integrity): status 0. */
    EdgepackException(String message) {
      super(message);
      this.status = 0;
    }
  }

  private static final int ALIGN = 64;
  private ByteBuffer ctx, plan, arena, state;
  private TensorInfo[] inputs, outputs;
  private final String[][] ioNames;
  private final String[][] dimNames;   // per input, per dim: the symbol from io.txt (null: fixed or not given)
  private final int[][] minDims, maxDims, planDims;   // planDims: the plan's dims, -1 where symbolic
  private int[][] shapes;              // version 2: the dims set last (null: none yet)
  private TensorInfo[] ran;            // version 2: the outputs as the last run left them (null: none since resolving)

  private Session(ByteBuffer ctx, ByteBuffer plan, ByteBuffer arena, ByteBuffer state, String[][] io) {
    this.ctx = ctx;
    this.plan = plan;
    this.arena = arena;
    this.state = state;
    this.ioNames = new String[][] {io[0], io[1]};
    this.inputs = infos(ctx, true, io[0]);
    this.outputs = infos(ctx, false, io[1]);
    this.dimNames = new String[inputs.length][];
    this.minDims = new int[inputs.length][];
    this.maxDims = new int[inputs.length][];
    this.planDims = new int[inputs.length][];
    int[] b = new int[2];
    for (int i = 0; i < inputs.length; i++) {
      int rank = inputs[i].shape.length;
      dimNames[i] = new String[rank];
      minDims[i] = new int[rank];
      maxDims[i] = new int[rank];
      planDims[i] = inputs[i].shape.clone();
      String[] syms = i + 2 < io.length ? io[i + 2] : null;
      for (int k = 0; k < rank; k++) {
        int s = nInputBound(ctx, i, k, b);
        if (s != 0) throw new EdgepackException("reading the bounds of input " + i, s);
        minDims[i][k] = b[0];
        maxDims[i][k] = b[1];
        if (syms != null && k < syms.length && inputs[i].shape[k] < 0) dimNames[i][k] = syms[k];
      }
    }
    if (state != null) {   // after reading the plan's dims (symbolic ones are -1 there)
      int s = nSetState(ctx, state);
      if (s != 0) throw new EdgepackException("setting the plan state", s);
    }
  }

  /**
   * A direct buffer of exactly {@code size} bytes whose first byte is {@code align}-aligned.
   * (ByteBuffer.alignedSlice needs Java 9 / Android API 33: this does the same on Java 8 and every
   * Android level, asking the native side for the buffer's address.)
   */
  public static ByteBuffer allocateAligned(int size, int align) {
    if (size < 0 || align <= 0 || (align & (align - 1)) != 0) throw new IllegalArgumentException("size/align");
    ByteBuffer raw = ByteBuffer.allocateDirect(size + align);
    int mis = (int) (nAddress(raw) & (align - 1));
    raw.position(mis == 0 ? 0 : align - mis);
    raw.limit(raw.position() + size);
    return raw.slice().order(ByteOrder.LITTLE_ENDIAN);
  }

  /** Load a plan from a stream (e.g. an Android asset); names default to input0.., output0... */
  public static Session load(InputStream planStream) throws IOException {
    return load(planStream, (String) null);
  }

  /** Load a plan and its io.txt (both e.g. Android assets): names and the plan's SHA-256 from io.txt. */
  public static Session load(InputStream planStream, InputStream ioTxt) throws IOException {
    return load(planStream, new String(readAll(ioTxt), "UTF-8"));
  }

  /** As {@link #load(InputStream, InputStream)}, running on {@code threads} threads ({@link #setThreads}). */
  public static Session load(InputStream planStream, InputStream ioTxt, int threads) throws IOException {
    return load(planStream, ioTxt).setThreads(threads);
  }

  /** Load a plan from a stream; {@code ioTxt} is the bundle's io.txt (graph input/output names), or null. */
  public static Session load(InputStream planStream, String ioTxt) throws IOException {
    byte[] bytes = readAll(planStream);
    ByteBuffer p = allocateAligned(bytes.length, ALIGN);
    p.put(bytes);
    p.clear();
    return load(p, ioTxt);
  }

  /**
   * Load a plan held in a buffer. A direct, 64-byte aligned buffer is used in place (keep it
   * unchanged while the Session lives); anything else is copied into one.
   */
  public static Session load(ByteBuffer planBytes, String ioTxt) {
    ByteBuffer p = planBytes.slice();
    verifyPlan(p.duplicate(), ioTxt);
    if (!p.isDirect() || (nAddress(p) & (ALIGN - 1)) != 0) {
      ByteBuffer copy = allocateAligned(p.remaining(), ALIGN);
      copy.put(p);
      copy.clear();
      p = copy;
    }
    ByteBuffer ctx = allocateAligned(nCtxBytes(), ALIGN);
    int s = nOpen(ctx, p);
    if (s != 0) throw new EdgepackException("the runtime rejected the plan", s);
    ByteBuffer arena = null, state = null;
    if (nPlanVersion(ctx) == 2) {   // shapes resolved at run time: the state now, the arena per shape
      long sb = nStateBytes(ctx);
      if (sb < 0 || sb > Integer.MAX_VALUE - ALIGN) throw new IllegalStateException("plan state of " + sb + " bytes is too large");
      state = allocateAligned((int) sb, ALIGN);   // handed to the core by the constructor, once the plan's dims are read
    } else {
      arena = bindArena(ctx, null);
    }
    return new Session(ctx, p, arena, state, parseIo(ioTxt));
  }

  /**
   * io.txt's "sha256 TAB model.plan TAB hex" line against the plan's bytes, before the runtime reads them (as
   * edgepack-run and edgepack_runtime.py check manifest.json's hash). io.txt without that line is refused.
   */
  private static void verifyPlan(ByteBuffer planBytes, String ioTxt) {
    if (ioTxt == null) return;
    String want = null;
    for (String line : ioTxt.split("\n")) {
      String[] f = line.trim().split("\t");
      if (f.length == 3 && f[0].equals("sha256") && f[1].equals("model.plan")) want = f[2].toLowerCase(java.util.Locale.ROOT);
    }
    if (want == null) throw new EdgepackException("io.txt has no SHA-256 for model.plan (a bundle from an older packager?)");
    MessageDigest md;
    try {
      md = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("no SHA-256 in this Java runtime", e);
    }
    md.update(planBytes);
    StringBuilder got = new StringBuilder();
    for (byte b : md.digest()) got.append(String.format("%02x", b & 0xff));
    if (!got.toString().equals(want))
      throw new EdgepackException("model.plan does not match its SHA-256 in io.txt (tampered or corrupt): " + got + " != " + want);
  }

  // ---- threads: one pool per process (the library's), workers are daemon Java threads ----
  /** Most threads a session may use (EP_EDGE_MAX_THREADS). */
  public static final int MAX_THREADS = 16;
  private static int workersStarted = 1;   // the caller is thread 0
  private int threads = 1;

  private static synchronized void startWorkers(int n) {
    for (; workersStarted < n; workersStarted++) {
      final int index = workersStarted;
      Thread t = new Thread(new Runnable() {
        @Override
        public void run() {
          nWorkerMain(index);   // returns only if the pool is stopped
        }
      }, "edgepack-worker-" + index);
      t.setDaemon(true);
      t.start();
    }
  }

  /** Runs this session's plan on {@code n} threads (1..MAX_THREADS) from the next run on; returns this. */
  public Session setThreads(int n) {
    if (n < 1 || n > MAX_THREADS) throw new IllegalArgumentException("threads must be in [1, " + MAX_THREADS + "], got " + n);
    startWorkers(n);
    threads = n;
    return this;
  }

  /** The thread count set by {@link #setThreads} (1 by default). */
  public int threads() {
    return threads;
  }

  /** Tasks pool thread {@code index} has run so far in this process (0: the threads calling run). */
  public static int threadTasks(int index) {
    return nThreadTasks(index);
  }

  /** Binds an arena of the size the runtime asks for: {@code have} again when large enough, else a new one. */
  private static ByteBuffer bindArena(ByteBuffer ctx, ByteBuffer have) {
    long need = nArenaBytes(ctx);
    if (need < 0 || need > Integer.MAX_VALUE - ALIGN) throw new IllegalStateException("arena of " + need + " bytes is too large");
    ByteBuffer arena = have != null && have.capacity() >= need ? have : allocateAligned((int) need, ALIGN);
    int s = nBind(ctx, arena);
    if (s != 0) throw new EdgepackException("binding the arena", s);
    return arena;
  }

  /**
   * io.txt: one line per tensor, "input|output TAB url-encoded-name [TAB dims]", in manifest order; dims
   * (version 2) are comma-separated, each a number or a url-encoded symbol name. Returns {input names,
   * output names, input 0's dims, input 1's dims, ...} (a dims entry is null when not given).
   */
  private static String[][] parseIo(String ioTxt) {
    List<String> in = new ArrayList<String>(), out = new ArrayList<String>();
    List<String[]> dims = new ArrayList<String[]>();
    if (ioTxt != null) {
      for (String line : ioTxt.split("\n")) {
        String[] f = line.trim().split("\t");
        if (f.length < 2 || f[0].startsWith("#")) continue;
        if (f[0].equals("input")) {
          in.add(decode(f[1]));
          String[] d = null;
          if (f.length >= 3 && !f[2].isEmpty()) {
            d = f[2].split(",", -1);
            for (int k = 0; k < d.length; k++) d[k] = decode(d[k]);
          }
          dims.add(d);
        } else if (f[0].equals("output")) {
          out.add(decode(f[1]));
        }
      }
    }
    String[][] r = new String[2 + dims.size()][];
    r[0] = in.toArray(new String[0]);
    r[1] = out.toArray(new String[0]);
    for (int i = 0; i < dims.size(); i++) r[2 + i] = dims.get(i);
    return r;
  }

  private static String decode(String s) {
    try {
      return URLDecoder.decode(s, "UTF-8");
    } catch (UnsupportedEncodingException e) {
      throw new IllegalStateException(e);
    }
  }

  private static TensorInfo[] infos(ByteBuffer ctx, boolean input, String[] names) {
    int n = nNumIO(ctx, input);
    if (names.length != 0 && names.length != n)
      throw new IllegalArgumentException("io.txt names " + names.length + (input ? " inputs" : " outputs") + ", the plan has " + n);
    TensorInfo[] r = new TensorInfo[n];
    int[] d = new int[12];
    for (int i = 0; i < n; i++) {
      int s = nDescribe(ctx, input, i, d);
      if (s != 0) throw new EdgepackException("describing a tensor", s);
      int[] shape = Arrays.copyOfRange(d, 4, 4 + d[2]);
      boolean known = true;   // version 2 before setInputShapes: symbolic dims are -1, byteSize -1
      for (int x : shape) known &= x >= 0;
      r[i] = new TensorInfo(names.length != 0 ? names[i] : (input ? "input" : "output") + i, d[1], shape,
          known ? d[3] : -1, d[0]);
    }
    return r;
  }

  /** True for a plan whose input dims are given per run (plan version 2). */
  public boolean hasDynamicShapes() {
    return state != null;
  }

  /** Least extent of each dim of input i. */
  public int[] inputMin(int i) {
    return minDims[i].clone();
  }

  /** Most extent of each dim of input i; 0 = unbounded. */
  public int[] inputMax(int i) {
    return maxDims[i].clone();
  }

  private String dimLabel(int i, int k) {
    return "dimension " + k + (dimNames[i][k] != null ? " ('" + dimNames[i][k] + "')" : "");
  }

  /**
   * The inputs' dims for the next runs (plan order). Checked here: rank, fixed dims, each dim within its
   * bounds, one extent per symbol (IllegalArgumentException naming the input, the dimension and the bound).
   * Version 2: the runtime resolves every tensor's dims and re-plans the arena (a larger one when needed);
   * afterwards inputInfo/outputInfo give this shape's dims and byte sizes. The same dims again cost nothing.
   * A fixed-shape plan accepts exactly its own dims.
   */
  public void setInputShapes(int[]... dims) {
    if (ctx == null) throw new IllegalStateException("session closed");
    if (dims.length != inputs.length) throw new IllegalArgumentException("expected " + inputs.length + " input shapes, got " + dims.length);
    java.util.Map<String, int[]> seen = new java.util.HashMap<String, int[]>();   // symbol -> {extent, input}
    for (int i = 0; i < dims.length; i++) {
      int[] d = dims[i];
      String name = inputs[i].name;
      if (d == null || d.length != minDims[i].length)
        throw new IllegalArgumentException("input '" + name + "': rank " + (d == null ? 0 : d.length) + ", expected " + minDims[i].length);
      for (int k = 0; k < d.length; k++) {
        if (planDims[i][k] >= 0 && d[k] != planDims[i][k])
          throw new IllegalArgumentException("input '" + name + "': dimension " + k + " is " + d[k] + ", expected "
              + planDims[i][k] + " (fixed; shape " + Arrays.toString(d) + ")");
        int lo = minDims[i][k], hi = maxDims[i][k];
        String range = "[" + lo + ".." + (hi > 0 ? String.valueOf(hi) : "") + "]";
        if (d[k] < lo)
          throw new IllegalArgumentException("input '" + name + "': " + dimLabel(i, k) + " is " + d[k] + ", below its bound " + lo
              + " (this plan accepts " + range + ")");
        if (hi > 0 && d[k] > hi)
          throw new IllegalArgumentException("input '" + name + "': " + dimLabel(i, k) + " is " + d[k] + ", above its bound " + hi
              + " (this plan accepts " + range + ")");
        String sym = dimNames[i][k];
        if (sym != null) {
          int[] prev = seen.get(sym);
          if (prev != null && prev[0] != d[k])
            throw new IllegalArgumentException("input '" + name + "': " + dimLabel(i, k) + " is " + d[k] + ", but input '"
                + inputs[prev[1]].name + "' gives '" + sym + "' = " + prev[0]);
          seen.put(sym, new int[] {d[k], i});
        }
      }
    }
    if (state == null) return;   // fixed shapes: the bounds above are the dims themselves
    if (shapes != null && Arrays.deepEquals(shapes, dims)) return;
    shapes = null;
    for (int i = 0; i < dims.length; i++) {
      int s = nSetInputShape(ctx, i, dims[i]);
      if (s != 0) throw new EdgepackException("input '" + inputs[i].name + "' shape " + Arrays.toString(dims[i]), s);
    }
    int s = nResolve(ctx);
    if (s != 0) throw new EdgepackException("resolving input shapes " + Arrays.deepToString(dims), s);
    arena = bindArena(ctx, arena);
    inputs = infos(ctx, true, ioNames[0]);
    outputs = infos(ctx, false, ioNames[1]);
    ran = null;
    int[][] copy = new int[dims.length][];
    for (int i = 0; i < dims.length; i++) copy[i] = dims[i].clone();
    shapes = copy;
  }

  /**
   * Run once on tensors (data + dims, plan order): sets the input shapes (version 2; a fixed-shape plan
   * checks them), runs, returns each output with its dims.
   */
  public Tensor[] run(Tensor... ins) {
    if (ins.length != inputs.length) throw new IllegalArgumentException("expected " + inputs.length + " inputs, got " + ins.length);
    int[][] dims = new int[ins.length][];
    ByteBuffer[] bufs = new ByteBuffer[ins.length];
    for (int i = 0; i < ins.length; i++) {
      if (ins[i] == null) throw new IllegalArgumentException("input '" + inputs[i].name + "' is null");
      if (ins[i].dtype != inputs[i].dtype)
        throw new IllegalArgumentException("input '" + inputs[i].name + "': dtype " + ins[i].dtype + ", expected " + inputs[i].dtype);
      dims[i] = ins[i].shape;
      bufs[i] = ins[i].data;
    }
    setInputShapes(dims);
    ByteBuffer[] outs = run(bufs);
    Tensor[] r = new Tensor[outs.length];
    for (int i = 0; i < outs.length; i++) r[i] = new Tensor(outputInfo(i).dtype, outputInfo(i).shape, outs[i]);
    return r;
  }

  public int numInputs() {
    return inputs.length;
  }

  public int numOutputs() {
    return outputs.length;
  }

  public TensorInfo inputInfo(int i) {
    return inputs[i];
  }

  /** Output i's dtype, dims and bytes: after a run, as that run set them (NonZero, NonMaxSuppression and Unique set
   * their outputs' extents when they run); before, the largest they can take (what newOutputBuffer allocates). */
  public TensorInfo outputInfo(int i) {
    return ran != null ? ran[i] : outputs[i];
  }

  /** Index of the input called {@code name}, or an IllegalArgumentException naming the valid ones. */
  public int inputIndex(String name) {
    for (int i = 0; i < inputs.length; i++) if (inputs[i].name.equals(name)) return i;
    throw new IllegalArgumentException("unknown input '" + name + "'; this model takes " + names(inputs));
  }

  public int outputIndex(String name) {
    for (int i = 0; i < outputs.length; i++) if (outputs[i].name.equals(name)) return i;
    throw new IllegalArgumentException("unknown output '" + name + "'; this model gives " + names(outputs));
  }

  private static String names(TensorInfo[] t) {
    StringBuilder b = new StringBuilder();
    for (TensorInfo x : t) b.append(b.length() == 0 ? "'" : ", '").append(x.name).append('\'');
    return b.toString();
  }

  private void requireShapes() {
    if (ctx == null) throw new IllegalStateException("session closed");
    if (state != null && shapes == null)
      throw new IllegalStateException("this plan's input shapes are given per run: call setInputShapes first, or run(Tensor...)");
  }

  /** A direct, little-endian buffer of the right size for input i (version 2: at the shapes set last). */
  public ByteBuffer newInputBuffer(int i) {
    requireShapes();
    return allocateAligned(inputs[i].byteSize, ALIGN);
  }

  public ByteBuffer newOutputBuffer(int i) {
    requireShapes();
    return allocateAligned(outputs[i].byteSize, ALIGN);
  }

  /**
   * Run once: copies each input's remaining bytes (exactly its byteSize, direct buffers) into the
   * arena, runs every kernel, copies each output into {@code outs[i]} (direct, remaining() >= byteSize).
   * Positions are left unchanged.
   */
  public void run(ByteBuffer[] ins, ByteBuffer[] outs) {
    requireShapes();
    if (ins.length != inputs.length) throw new IllegalArgumentException("expected " + inputs.length + " inputs, got " + ins.length);
    if (outs.length != outputs.length) throw new IllegalArgumentException("expected " + outputs.length + " outputs, got " + outs.length);
    ByteBuffer[] is = new ByteBuffer[ins.length], os = new ByteBuffer[outs.length];
    for (int i = 0; i < ins.length; i++) is[i] = check(ins[i], inputs[i], "input", true);
    for (int i = 0; i < outs.length; i++) os[i] = check(outs[i], outputs[i], "output", false);
    nSetThreads(threads);   // the pool's count is per process: this session's, for this run
    int s = nRun(ctx, is, os);
    if (s != 0) throw new EdgepackException("run failed", s);
    if (state != null) ran = infos(ctx, false, ioNames[1]);   // NonZero, NMS, Unique: the run set their extents
  }

  /** Run once, allocating the outputs. */
  public ByteBuffer[] run(ByteBuffer... ins) {
    ByteBuffer[] outs = new ByteBuffer[outputs.length];
    for (int i = 0; i < outs.length; i++) outs[i] = newOutputBuffer(i);
    run(ins, outs);
    for (int i = 0; i < outs.length; i++) outs[i].limit(outputInfo(i).byteSize);   // an extent the run set: fewer bytes
    return outs;
  }

  private static ByteBuffer check(ByteBuffer b, TensorInfo t, String kind, boolean exact) {
    if (b == null) throw new IllegalArgumentException(kind + " '" + t.name + "' is null");
    if (!b.isDirect()) throw new IllegalArgumentException(kind + " '" + t.name + "' must be a direct ByteBuffer (ByteBuffer.allocateDirect or newInputBuffer)");
    if (b.isReadOnly() && !exact) throw new IllegalArgumentException(kind + " '" + t.name + "' is read-only");
    int r = b.remaining();
    if (exact ? r != t.byteSize : r < t.byteSize)
      throw new IllegalArgumentException(kind + " '" + t.name + "': " + r + " bytes remaining, expected " + t.byteSize
          + " (" + Arrays.toString(t.shape) + ", dtype " + t.dtype + ")");
    return b.slice();
  }

  /** Vector layer the native library was built with ("neon", "scalar", ...). */
  public static String vectorLayer() {
    return nVecName();
  }

  /** CPU features the library detected from /proc/self/auxv (CPU_DOTPROD, ...). */
  public static int cpuFeatures() {
    return nCpuFeatures();
  }

  /** Drops the references to the plan, arena and context buffers (freed by the GC). */
  @Override
  public void close() {
    ctx = null;
    plan = null;
    arena = null;
    state = null;
  }

  /** All bytes of a stream (closed afterwards): e.g. an asset for {@link #load(ByteBuffer, String)}. */
  public static byte[] readAll(InputStream in) throws IOException {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    byte[] buf = new byte[1 << 16];
    int n;
    while ((n = in.read(buf)) > 0) o.write(buf, 0, n);
    in.close();
    return o.toByteArray();
  }

  private static native int nCtxBytes();
  private static native long nAddress(ByteBuffer b);
  private static native int nOpen(ByteBuffer ctx, ByteBuffer plan);
  private static native long nArenaBytes(ByteBuffer ctx);
  private static native int nBind(ByteBuffer ctx, ByteBuffer arena);
  private static native int nNumIO(ByteBuffer ctx, boolean inputs);
  private static native int nDescribe(ByteBuffer ctx, boolean input, int index, int[] out);
  private static native int nRun(ByteBuffer ctx, ByteBuffer[] ins, ByteBuffer[] outs);
  private static native String nStatusStr(int status);
  private static native int nPlanVersion(ByteBuffer ctx);
  private static native long nStateBytes(ByteBuffer ctx);
  private static native int nSetState(ByteBuffer ctx, ByteBuffer state);
  private static native int nSetInputShape(ByteBuffer ctx, int index, int[] dims);
  private static native int nInputBound(ByteBuffer ctx, int index, int dim, int[] out);
  private static native int nResolve(ByteBuffer ctx);
  private static native String nVecName();
  private static native int nCpuFeatures();
  private static native void nWorkerMain(int index);
  private static native int nSetThreads(int n);
  private static native int nThreadTasks(int index);
}

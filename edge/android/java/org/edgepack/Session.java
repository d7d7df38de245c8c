package org.edgepack;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UnsupportedEncodingException;
import java.net.URLDecoder;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
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
 *   Session s = Session.load(assets.open("edgepack/model.plan"), readAll(assets.open("edgepack/io.txt")));
 *   ByteBuffer x = s.newInputBuffer(0);   x.asFloatBuffer().put(pixels);
 *   ByteBuffer[] y = s.run(x);            float[] logits = ...; y[0].asFloatBuffer().get(logits);
 * </pre>
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

  /** The runtime refused the plan or a run; {@link #status} is the ep_status code. */
  public static final class EdgepackException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    public final int status;

    EdgepackException(String what, int status) {
      super(what + ": " + nStatusStr(status) + " (status " + status + ")");
      this.status = status;
    }
  }

  private static final int ALIGN = 64;
  private ByteBuffer ctx, plan, arena;
  private final TensorInfo[] inputs, outputs;

  private Session(ByteBuffer ctx, ByteBuffer plan, ByteBuffer arena, TensorInfo[] inputs, TensorInfo[] outputs) {
    this.ctx = ctx;
    this.plan = plan;
    this.arena = arena;
    this.inputs = inputs;
    this.outputs = outputs;
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
    return load(planStream, null);
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
    if (!p.isDirect() || (nAddress(p) & (ALIGN - 1)) != 0) {
      ByteBuffer copy = allocateAligned(p.remaining(), ALIGN);
      copy.put(p);
      copy.clear();
      p = copy;
    }
    ByteBuffer ctx = allocateAligned(nCtxBytes(), ALIGN);
    int s = nOpen(ctx, p);
    if (s != 0) throw new EdgepackException("the runtime rejected the plan", s);
    long need = nArenaBytes(ctx);
    if (need > Integer.MAX_VALUE - ALIGN) throw new IllegalStateException("arena of " + need + " bytes is too large");
    ByteBuffer arena = allocateAligned((int) need, ALIGN);
    s = nBind(ctx, arena);
    if (s != 0) throw new EdgepackException("binding the arena", s);
    String[][] names = parseIo(ioTxt);
    return new Session(ctx, p, arena, infos(ctx, true, names[0]), infos(ctx, false, names[1]));
  }

  /** io.txt: one line per tensor, "input|output TAB url-encoded-name", in manifest order. */
  private static String[][] parseIo(String ioTxt) {
    List<String> in = new ArrayList<String>(), out = new ArrayList<String>();
    if (ioTxt != null) {
      for (String line : ioTxt.split("\n")) {
        String[] f = line.trim().split("\t");
        if (f.length < 2 || f[0].startsWith("#")) continue;
        String name;
        try {
          name = URLDecoder.decode(f[1], "UTF-8");
        } catch (UnsupportedEncodingException e) {
          throw new IllegalStateException(e);
        }
        if (f[0].equals("input")) in.add(name);
        else if (f[0].equals("output")) out.add(name);
      }
    }
    return new String[][] {in.toArray(new String[0]), out.toArray(new String[0])};
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
      r[i] = new TensorInfo(names.length != 0 ? names[i] : (input ? "input" : "output") + i, d[1], shape, d[3], d[0]);
    }
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

  public TensorInfo outputInfo(int i) {
    return outputs[i];
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

  /** A direct, little-endian buffer of the right size for input i. */
  public ByteBuffer newInputBuffer(int i) {
    return allocateAligned(inputs[i].byteSize, ALIGN);
  }

  public ByteBuffer newOutputBuffer(int i) {
    return allocateAligned(outputs[i].byteSize, ALIGN);
  }

  /**
   * Run once: copies each input's remaining bytes (exactly its byteSize, direct buffers) into the
   * arena, runs every kernel, copies each output into {@code outs[i]} (direct, remaining() >= byteSize).
   * Positions are left unchanged.
   */
  public void run(ByteBuffer[] ins, ByteBuffer[] outs) {
    if (ctx == null) throw new IllegalStateException("session closed");
    if (ins.length != inputs.length) throw new IllegalArgumentException("expected " + inputs.length + " inputs, got " + ins.length);
    if (outs.length != outputs.length) throw new IllegalArgumentException("expected " + outputs.length + " outputs, got " + outs.length);
    ByteBuffer[] is = new ByteBuffer[ins.length], os = new ByteBuffer[outs.length];
    for (int i = 0; i < ins.length; i++) is[i] = check(ins[i], inputs[i], "input", true);
    for (int i = 0; i < outs.length; i++) os[i] = check(outs[i], outputs[i], "output", false);
    int s = nRun(ctx, is, os);
    if (s != 0) throw new EdgepackException("run failed", s);
  }

  /** Run once, allocating the outputs. */
  public ByteBuffer[] run(ByteBuffer... ins) {
    ByteBuffer[] outs = new ByteBuffer[outputs.length];
    for (int i = 0; i < outs.length; i++) outs[i] = newOutputBuffer(i);
    run(ins, outs);
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
  }

  static byte[] readAll(InputStream in) throws IOException {
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
  private static native String nVecName();
  private static native int nCpuFeatures();
}

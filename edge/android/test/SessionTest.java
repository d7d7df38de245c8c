import java.io.ByteArrayInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.edgepack.Session;

/**
 * The Java wrapper against a real library (host build of the core + JNI glue, or the device's).
 *   java -Djava.library.path=DIR -cp classes:. SessionTest PLAN IO_TXT EXPECT_DIR
 * EXPECT_DIR holds in0.bin.. (raw input bytes, plan order) and out0.bin.. (expected outputs, float32
 * compared within 1e-4 abs+rel, other dtypes exactly). Prints "OK n checks" or throws.
 */
public class SessionTest {
  static int checks = 0;

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
    checks++;
  }

  interface Body { void run() throws Exception; }

  static void expectThrows(Class<? extends Throwable> type, String fragment, Body body) throws Exception {
    try {
      body.run();
    } catch (Throwable t) {
      check(type.isInstance(t), "expected " + type.getSimpleName() + ", got " + t);
      check(t.getMessage() != null && t.getMessage().contains(fragment), "message '" + t.getMessage() + "' lacks '" + fragment + "'");
      return;
    }
    throw new AssertionError("expected " + type.getSimpleName() + " containing '" + fragment + "'");
  }

  static ByteBuffer direct(byte[] b) {
    ByteBuffer d = ByteBuffer.allocateDirect(b.length).order(ByteOrder.LITTLE_ENDIAN);
    d.put(b);
    d.clear();
    return d;
  }

  public static void main(String[] args) throws Exception {
    final byte[] plan = Files.readAllBytes(Paths.get(args[0]));
    String io = new String(Files.readAllBytes(Paths.get(args[1])), "UTF-8");
    String dir = args[2];

    check(Session.vectorLayer().length() > 0, "vector layer name");
    Session s = Session.load(new FileInputStream(args[0]), io);
    int nIn = s.numInputs(), nOut = s.numOutputs();
    check(nIn > 0 && nOut > 0, "I/O counts");

    // aligned allocation
    for (int i = 0; i < 8; i++) {
      ByteBuffer a = Session.allocateAligned(100 + i, 64);
      check(a.isDirect() && a.capacity() == 100 + i && a.order() == ByteOrder.LITTLE_ENDIAN, "allocateAligned");
    }

    ByteBuffer[] ins = new ByteBuffer[nIn];
    for (int i = 0; i < nIn; i++) ins[i] = direct(Files.readAllBytes(Paths.get(dir, "in" + i + ".bin")));
    ByteBuffer[] outs = s.run(ins);
    ByteBuffer[] again = s.run(ins);
    for (int i = 0; i < nOut; i++) {
      byte[] want = Files.readAllBytes(Paths.get(dir, "out" + i + ".bin"));
      Session.TensorInfo t = s.outputInfo(i);
      check(t.byteSize == want.length, "output " + i + " size " + t.byteSize + " vs " + want.length);
      ByteBuffer w = ByteBuffer.wrap(want).order(ByteOrder.LITTLE_ENDIAN);
      ByteBuffer g = outs[i].order(ByteOrder.LITTLE_ENDIAN);
      check(g.equals(again[i]), "two runs give the same bytes");
      if (t.dtype == Session.FLOAT) {
        double worst = 0;
        for (int k = 0; k < want.length / 4; k++) {
          float a = g.getFloat(4 * k), b = w.getFloat(4 * k);
          double d = Math.abs(a - b);
          worst = Math.max(worst, d);
          check(d <= 1e-4 + 1e-4 * Math.abs(b), "output " + t.name + "[" + k + "]: " + a + " vs " + b);
        }
        System.out.println("output " + t + " max abs diff " + worst);
      } else {
        check(g.equals(w), "output " + t.name + " bytes");
      }
    }

    // names from io.txt, lookups and their errors
    check(s.inputIndex(s.inputInfo(0).name) == 0, "inputIndex");
    final Session fs = s;
    expectThrows(IllegalArgumentException.class, "unknown input 'no such input'", () -> fs.inputIndex("no such input"));
    // wrong buffers
    final ByteBuffer[] good = ins;
    expectThrows(IllegalArgumentException.class, "expected " + nIn + " inputs", () -> fs.run(new ByteBuffer[nIn + 1]));
    final ByteBuffer small = ByteBuffer.allocateDirect(Math.max(0, s.inputInfo(0).byteSize - 4));
    expectThrows(IllegalArgumentException.class, "bytes remaining, expected", () -> {
      ByteBuffer[] b = good.clone(); b[0] = small; fs.run(b);
    });
    final ByteBuffer heap = ByteBuffer.allocate(s.inputInfo(0).byteSize);
    expectThrows(IllegalArgumentException.class, "must be a direct ByteBuffer", () -> {
      ByteBuffer[] b = good.clone(); b[0] = heap; fs.run(b);
    });
    // hostile plans are refused by the runtime, with its reason
    expectThrows(Session.EdgepackException.class, "plan truncated", () -> Session.load(new ByteArrayInputStream(java.util.Arrays.copyOf(plan, 40))));
    final byte[] bad = plan.clone();
    bad[0] = 'X';
    expectThrows(Session.EdgepackException.class, "bad magic", () -> Session.load(new ByteArrayInputStream(bad)));
    final byte[] cut = java.util.Arrays.copyOf(plan, plan.length - 8);
    expectThrows(Session.EdgepackException.class, "rejected the plan", () -> Session.load(new ByteArrayInputStream(cut)));
    // a heap (non-direct) plan buffer is copied into an aligned direct one
    Session s2 = Session.load(ByteBuffer.wrap(plan), null);
    check(s2.inputInfo(0).name.equals("input0"), "default names without io.txt");
    check(s2.run(ins)[0].equals(outs[0]), "same result from a second session");
    s.close();
    expectThrows(IllegalStateException.class, "closed", () -> fs.run(good));
    System.out.println("cpu features 0x" + Integer.toHexString(Session.cpuFeatures()) + ", vector layer " + Session.vectorLayer());
    System.out.println("OK " + checks + " checks");
  }
}

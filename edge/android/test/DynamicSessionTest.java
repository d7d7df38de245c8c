import java.io.FileInputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.edgepack.Session;

/**
 * The Java wrapper on a plan whose input shapes are given per run (plan version 2), against a real library.
 *   java -Djava.library.path=DIR -cp classes:. DynamicSessionTest PLAN IO_TXT CASE_DIR... [--above I,K,VALUE,FRAGMENT]
 * Each CASE_DIR holds, per input (plan order), in<i>.bin (raw bytes) and in<i>.shape (dims, comma-separated),
 * and per output out<i>.bin (expected) and out<i>.shape. Float32 outputs are compared within 1e-4 abs+rel,
 * others exactly. Every case runs twice through run(Tensor...) and once through setInputShapes +
 * run(ByteBuffer...), in the order given and then in reverse (the arena grows, then is reused). --above: input
 * I's dim K set to VALUE must be refused with a message containing FRAGMENT. Prints "OK n checks" or throws.
 */
public class DynamicSessionTest {
  static int checks = 0;

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
    checks++;
  }

  static int[] dims(Path p) throws Exception {
    String s = new String(Files.readAllBytes(p), "UTF-8").trim();
    if (s.isEmpty()) return new int[0];
    String[] f = s.split(",");
    int[] d = new int[f.length];
    for (int i = 0; i < f.length; i++) d[i] = Integer.parseInt(f[i].trim());
    return d;
  }

  static void compare(Session s, int i, ByteBuffer got, int[] gotShape, Path dir) throws Exception {
    byte[] want = Files.readAllBytes(dir.resolve("out" + i + ".bin"));
    int[] wantShape = dims(dir.resolve("out" + i + ".shape"));
    Session.TensorInfo t = s.outputInfo(i);
    check(java.util.Arrays.equals(gotShape, wantShape), "output " + t.name + " dims " + java.util.Arrays.toString(gotShape)
        + ", expected " + java.util.Arrays.toString(wantShape));
    check(t.byteSize == want.length, "output " + t.name + " byteSize " + t.byteSize + " vs " + want.length);
    ByteBuffer w = ByteBuffer.wrap(want).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer g = got.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    if (t.dtype == Session.FLOAT) {
      for (int k = 0; k < want.length / 4; k++) {
        float a = g.getFloat(4 * k), b = w.getFloat(4 * k);
        check(Math.abs(a - b) <= 1e-4 + 1e-4 * Math.abs(b), "output " + t.name + "[" + k + "]: " + a + " vs " + b);
      }
    } else {
      check(g.equals(w), "output " + t.name + " bytes");
    }
  }

  static void runCase(Session s, Path dir) throws Exception {
    int n = s.numInputs();
    Session.Tensor[] ins = new Session.Tensor[n];
    int[][] shapes = new int[n][];
    ByteBuffer[] raw = new ByteBuffer[n];
    for (int i = 0; i < n; i++) {
      shapes[i] = dims(dir.resolve("in" + i + ".shape"));
      byte[] b = Files.readAllBytes(dir.resolve("in" + i + ".bin"));
      ins[i] = new Session.Tensor(s.inputInfo(i).dtype, shapes[i], ByteBuffer.wrap(b));
      raw[i] = Session.allocateAligned(b.length, 64);
      raw[i].put(b);
      raw[i].clear();
    }
    for (int rep = 0; rep < 2; rep++) {
      Session.Tensor[] out = s.run(ins);
      for (int i = 0; i < out.length; i++) compare(s, i, out[i].data, out[i].shape, dir);
    }
    s.setInputShapes(shapes);
    for (int i = 0; i < n; i++) check(java.util.Arrays.equals(s.inputInfo(i).shape, shapes[i]), "inputInfo shape after setInputShapes");
    ByteBuffer[] out = s.run(raw);
    for (int i = 0; i < out.length; i++) compare(s, i, out[i], s.outputInfo(i).shape, dir);
    System.out.println("case " + dir.getFileName() + " " + java.util.Arrays.deepToString(shapes) + " ok");
  }

  public static void main(String[] args) throws Exception {
    Session s = Session.load(new FileInputStream(args[0]), new String(Files.readAllBytes(Paths.get(args[1])), "UTF-8"));
    check(s.hasDynamicShapes(), "plan version 2");
    if (!java.util.Arrays.equals(s.inputMin(0), s.inputMax(0))) {   // symbolic input dims (not only run-set outputs)
      check(s.inputInfo(0).byteSize == -1, "byteSize unknown before the shapes are set");
      try {
        s.run(new ByteBuffer[s.numInputs()]);
        throw new AssertionError("run before setInputShapes");
      } catch (IllegalStateException e) {
        check(e.getMessage().contains("setInputShapes"), e.getMessage());
      }
    }
    java.util.List<Path> cases = new java.util.ArrayList<Path>();
    String above = null;
    for (int i = 2; i < args.length; i++) {
      if (args[i].equals("--above")) above = args[++i];
      else cases.add(Paths.get(args[i]));
    }
    for (Path c : cases) runCase(s, c);
    for (int i = cases.size() - 1; i >= 0; i--) runCase(s, cases.get(i));
    if (above != null) {
      String[] f = above.split(",", 4);
      int in = Integer.parseInt(f[0]), k = Integer.parseInt(f[1]), v = Integer.parseInt(f[2]);
      int[][] shapes = new int[s.numInputs()][];
      for (int i = 0; i < shapes.length; i++) shapes[i] = dims(cases.get(0).resolve("in" + i + ".shape"));
      shapes[in][k] = v;
      try {
        s.setInputShapes(shapes);
        throw new AssertionError("a dim above its bound was accepted");
      } catch (IllegalArgumentException e) {
        check(e.getMessage().contains(f[3]), "message '" + e.getMessage() + "' lacks '" + f[3] + "'");
        System.out.println("refused: " + e.getMessage());
      }
      int[][] bad = new int[shapes.length][];
      for (int i = 0; i < bad.length; i++) bad[i] = dims(cases.get(0).resolve("in" + i + ".shape"));
      int last = bad[in].length - 1;
      bad[in][last] += 1;   // the test model's last dim is fixed
      try {
        s.setInputShapes(bad);
        throw new AssertionError("a wrong fixed dim was accepted");
      } catch (IllegalArgumentException e) {
        check(e.getMessage().contains("dimension " + last + " is " + bad[in][last] + ", expected "), e.getMessage());
      }
      runCase(s, cases.get(0));   // still usable afterwards
    }
    System.out.println("input 0 bounds " + java.util.Arrays.toString(s.inputMin(0)) + ".." + java.util.Arrays.toString(s.inputMax(0)));
    System.out.println("OK " + checks + " checks");
  }
}

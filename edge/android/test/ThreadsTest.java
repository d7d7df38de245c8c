import java.io.ByteArrayInputStream;
import java.io.FileInputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.edgepack.Session;

/**
 * Threads and the plan's SHA-256 check of the Java wrapper, against a real library (host build or device).
 *   java -Djava.library.path=DIR -cp classes:. ThreadsTest PLAN IO_TXT IN0.bin THREADS
 * Runs the plan on 1 and THREADS threads (bytes must be equal), checks that the worker threads ran tasks,
 * that a tampered plan and an io.txt without the hash are refused, and that bad thread counts are.
 * Writes the THREADS-thread output 0 to IN0.bin + ".out". Prints "OK n checks" or throws.
 */
public class ThreadsTest {
  static int checks = 0;

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
    checks++;
  }

  static void refused(Class<? extends Throwable> type, String fragment, Runnable body) {
    try {
      body.run();
    } catch (Throwable t) {
      check(type.isInstance(t) && t.getMessage().contains(fragment), "expected " + type.getSimpleName() + " with '" + fragment + "', got " + t);
      return;
    }
    throw new AssertionError("not refused: expected '" + fragment + "'");
  }

  public static void main(String[] args) throws Exception {
    final byte[] plan = Files.readAllBytes(Paths.get(args[0]));
    final String io = new String(Files.readAllBytes(Paths.get(args[1])), "UTF-8");
    byte[] in0 = Files.readAllBytes(Paths.get(args[2]));
    int n = Integer.parseInt(args[3]);

    Session one = Session.load(new FileInputStream(args[0]), new FileInputStream(args[1]));
    Session many = Session.load(new FileInputStream(args[0]), new FileInputStream(args[1]), n);
    check(one.threads() == 1 && many.threads() == n, "thread counts");
    ByteBuffer x = one.newInputBuffer(0);
    x.put(in0);
    x.clear();
    int before = 0;
    for (int i = 1; i < n; i++) before += Session.threadTasks(i);
    ByteBuffer[] a = one.run(x), b = many.run(x);
    for (int r = 0; r < 5; r++) b = many.run(x);   // a few runs: the workers wake and take tasks
    int after = 0;
    for (int i = 1; i < n; i++) after += Session.threadTasks(i);
    for (int i = 0; i < a.length; i++) check(a[i].equals(b[i]), "output " + i + ": " + n + " threads differ from 1");
    check(after > before, "the worker threads ran no task (" + before + " -> " + after + ")");
    byte[] out = new byte[b[0].remaining()];
    b[0].duplicate().get(out);
    Files.write(Paths.get(args[2] + ".out"), out);

    // the plan's SHA-256 (io.txt) is checked before the runtime reads it
    final byte[] bad = plan.clone();
    bad[bad.length - 1] ^= 1;
    refused(Session.EdgepackException.class, "does not match its SHA-256", new Runnable() {
      public void run() {
        try { Session.load(new ByteArrayInputStream(bad), new ByteArrayInputStream(io.getBytes("UTF-8"))); }
        catch (java.io.IOException e) { throw new RuntimeException(e); }
      }
    });
    refused(Session.EdgepackException.class, "does not match its SHA-256", new Runnable() {
      public void run() { Session.load(ByteBuffer.wrap(bad), io); }
    });
    final String noHash = io.replaceAll("(?m)^sha256\t.*\n", "");
    refused(Session.EdgepackException.class, "no SHA-256", new Runnable() {
      public void run() { Session.load(ByteBuffer.wrap(plan), noHash); }
    });
    refused(IllegalArgumentException.class, "threads must be in [1, 16]", new Runnable() {
      public void run() { many.setThreads(0); }
    });
    refused(IllegalArgumentException.class, "threads must be in [1, 16]", new Runnable() {
      public void run() { many.setThreads(17); }
    });
    System.out.println("OK " + checks + " checks");
  }
}

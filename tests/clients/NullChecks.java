// Throws and catches 100000 NullPointerExceptions.  HotSpot compiles the
// null checks into plain loads and turns the resulting SIGSEGV into the
// exception in its signal handler (rewriting the PC in the context), so
// under mmfold's signal chaining every one of them goes through mmfold's
// handler first.  Prints a summary that does not depend on timing.
public class NullChecks {
    static final class Box { int v; Box(int v) { this.v = v; } }

    static int read(Box b) { return b.v; }

    public static void main(String[] args) {
        int n = 100000, caught = 0;
        long sum = 0;
        Box[] boxes = new Box[64];
        for (int i = 0; i < boxes.length; i++)
            boxes[i] = (i % 3 == 0) ? null : new Box(i);
        for (int i = 0; caught < n; i++) {
            try {
                sum += read(boxes[i % boxes.length]);
            } catch (NullPointerException e) {
                caught++;
            }
        }
        System.out.println("caught " + caught + " NullPointerExceptions, sum " + sum);
        String s = null;
        try {
            s.length();
        } catch (NullPointerException e) {
            System.out.println("string NPE caught");
        }
    }
}

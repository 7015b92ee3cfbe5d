public class Check {
    static int failed = 0;
    static void check(String what, boolean ok) {
        if (!ok) { failed++; System.err.println("FAIL " + what); }
    }
    public static void main(String[] args) throws Exception {
        byte[] b = {(byte) 0xfb, (byte) 0xff};
        check("url encoder", "-_8=".equals(java.util.Base64.getUrlEncoder().encodeToString(b)));
        check("basic encoder", "+/8=".equals(java.util.Base64.getEncoder().encodeToString(b)));
        check("url round trip", java.util.Arrays.equals(b, java.util.Base64.getUrlDecoder().decode("-_8=")));
        if (failed > 0) { System.exit(1); }
        System.out.println("all checks passed");
    }
}

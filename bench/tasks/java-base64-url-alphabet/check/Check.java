public class Check {
    public static void main(String[] args) throws Exception {
        byte[] b = {(byte) 0xfb, (byte) 0xff};
        Checks.check("url encoder", "-_8=".equals(java.util.Base64.getUrlEncoder().encodeToString(b)));
        Checks.check("basic encoder", "+/8=".equals(java.util.Base64.getEncoder().encodeToString(b)));
        Checks.check("url round trip", java.util.Arrays.equals(b, java.util.Base64.getUrlDecoder().decode("-_8=")));
        Checks.done();
    }
}

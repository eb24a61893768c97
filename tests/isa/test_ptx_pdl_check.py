#!/usr/bin/env python3
"""Unit tests of ptx_pdl_check.py on hand-written PTX (no nvcc needed)."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptx_pdl_check as chk  # noqa: E402

HEAD = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 g_flag;
.visible .entry k(
\t.param .align 8 .b8 k_param_0[24],
\t.param .u64 k_param_1
)
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<20>;
\t.reg .b64 %rd<20>;
\t.shared .align 4 .b8 smem[256];
\tld.param.u64 %rd1, [k_param_0];
\tld.param.u64 %rd2, [k_param_0+8];
\tld.param.u64 %rd3, [k_param_1];
\tcvta.to.global.u64 %rd4, %rd1;
\tcvta.to.global.u64 %rd5, %rd2;
\tmov.u32 %r1, %tid.x;
\tmul.wide.u32 %rd6, %r1, 4;
\tadd.s64 %rd7, %rd4, %rd6;
\tadd.s64 %rd8, %rd5, %rd6;
"""
TAIL = """
\tret;
}
"""


def run(body, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(HEAD + body + TAIL)
        path = f.name
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            rc = chk.main([path, "-q", *args])
    finally:
        os.unlink(path)
    return rc, out.getvalue()


class Check(unittest.TestCase):
    def test_good(self):
        rc, out = run("\tgriddepcontrol.wait;\n\tld.global.u32 %r2, [%rd7];\n\tst.global.u32 [%rd8], %r2;\n")
        self.assertEqual(rc, 0, out)

    def test_no_wait(self):
        rc, out = run("\tld.global.u32 %r2, [%rd7];\n")
        self.assertEqual(rc, 1)
        self.assertIn("no unpredicated griddepcontrol.wait", out)

    def test_store_before_wait(self):
        rc, out = run("\tst.global.u32 [%rd8], %r1;\n\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 1)
        self.assertIn("param 0+8", out)

    def test_generic_before_wait(self):
        rc, out = run("\tld.u32 %r2, [%rd2];\n\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 1)
        self.assertIn("generic", out)

    def test_l2_prefetch_before_wait_ok(self):  # no value reaches the thread; L2 is where the predecessor writes
        rc, out = run("\tprefetch.global.L2 [%rd7];\n\tgriddepcontrol.wait;\n\tld.global.u32 %r2, [%rd7];\n")
        self.assertEqual(rc, 0, out)

    def test_cp_async_before_wait(self):  # a copy into shared memory is a read: behind the wait
        rc, out = run("\tcp.async.cg.shared.global [%r5], [%rd7], 16;\n\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 1, out)

    def test_generic_shared_ok(self):
        rc, out = run("\tmov.u64 %rd9, smem;\n\tcvta.shared.u64 %rd10, %rd9;\n\tld.u32 %r2, [%rd10];\n"
                      "\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 0, out)

    def test_atom_cp_async_before_wait(self):
        rc, out = run("\tatom.global.add.u32 %r2, [%rd7], 1;\n\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 1)
        rc, out = run("\tmov.u32 %r3, smem;\n\tcp.async.cg.shared.global [%r3], [%rd7], 16;\n\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 1)
        self.assertIn("param 0+0", out)

    def test_shared_and_param_ok(self):
        rc, out = run("\tst.shared.u32 [smem], %r1;\n\tld.shared.u32 %r2, [smem];\n\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 0, out)

    def test_branch_skips_wait(self):
        body = ("\tsetp.ge.u32 %p1, %r1, 32;\n\t@%p1 bra $L_skip;\n\tgriddepcontrol.wait;\n"
                "$L_skip:\n\tld.global.u32 %r2, [%rd7];\n")
        rc, out = run(body)
        self.assertEqual(rc, 1)
        self.assertIn("before griddepcontrol.wait on some path", out)

    def test_wait_on_both_paths(self):
        body = ("\tsetp.ge.u32 %p1, %r1, 32;\n\t@%p1 bra $L_a;\n\tgriddepcontrol.wait;\n\tbra.uni $L_j;\n"
                "$L_a:\n\tgriddepcontrol.wait;\n$L_j:\n\tld.global.u32 %r2, [%rd7];\n")
        rc, out = run(body)
        self.assertEqual(rc, 0, out)

    def test_early_exit(self):
        body = "\tsetp.ge.u32 %p1, %r1, 32;\n\t@%p1 ret;\n\tgriddepcontrol.wait;\n"
        rc, out = run(body)
        self.assertEqual(rc, 1)
        self.assertIn("exits on a path", out)

    def test_predicated_wait_does_not_count(self):
        rc, out = run("\tsetp.ge.u32 %p1, %r1, 32;\n\t@%p1 griddepcontrol.wait;\n\tld.global.u32 %r2, [%rd7];\n")
        self.assertEqual(rc, 1)

    def test_loop_load_before_wait(self):
        body = ("$L_loop:\n\tld.global.u32 %r2, [%rd7];\n\tsetp.ne.u32 %p1, %r2, 0;\n\t@%p1 bra $L_loop;\n"
                "\tgriddepcontrol.wait;\n")
        rc, out = run(body)
        self.assertEqual(rc, 1)

    def test_wait_in_loop_after_load_flags(self):
        # wait inside a loop, load at the loop head: first iteration is unwaited
        body = ("$L_loop:\n\tld.global.u32 %r2, [%rd7];\n\tgriddepcontrol.wait;\n\tsetp.ne.u32 %p1, %r2, 0;\n"
                "\t@%p1 bra $L_loop;\n")
        rc, out = run(body)
        self.assertEqual(rc, 1)

    def test_allow_list(self):
        body = "\tld.global.u32 %r2, [%rd7];\n\tgriddepcontrol.wait;\n"
        self.assertEqual(run(body, "--allow", "k:0+0")[0], 0)
        self.assertEqual(run(body, "--allow", "k:0")[0], 0)
        self.assertEqual(run(body, "--allow", "k:k_param_0+0")[0], 0)
        self.assertEqual(run(body, "--allow", "k:0+8")[0], 1)
        self.assertEqual(run(body, "--allow", "other:0+0")[0], 1)
        self.assertEqual(run(body, "--exclude", "k")[0], 3)  # every kernel excluded: nothing checked

    def test_global_symbol(self):
        body = "\tld.global.u32 %r2, [g_flag];\n\tgriddepcontrol.wait;\n"
        self.assertEqual(run(body)[0], 1)
        self.assertEqual(run(body, "--allow", "k:sym:g_flag")[0], 0)

    def test_call_before_wait(self):
        rc, out = run("\tcall.uni vprintf, (%rd1, %rd2);\n\tgriddepcontrol.wait;\n")
        self.assertEqual(rc, 1)
        self.assertIn("call before", out)

    def test_nc_after_wait(self):
        body = "\tgriddepcontrol.wait;\n\tld.global.nc.u32 %r2, [%rd7];\n"
        self.assertEqual(run(body)[0], 1)
        self.assertEqual(run(body, "--nc", "warn")[0], 0)
        self.assertEqual(run(body, "--allow", "k:0+0")[0], 0)

    def test_pointer_loaded_from_memory_not_allowed(self):
        body = ("\tgriddepcontrol.wait;\n\tld.global.u64 %rd9, [%rd7];\n")
        self.assertEqual(run(body)[0], 0)
        body = ("\tld.global.u64 %rd9, [%rd7];\n\tld.global.u32 %r2, [%rd9];\n\tgriddepcontrol.wait;\n")
        rc, out = run(body, "--allow", "k:0+0")
        self.assertEqual(rc, 1)
        self.assertIn("mem", out)

    def test_nothing_checked_fails(self):
        # a file without any .entry (e.g. a build that compiled the kernels out) is no pass
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(".version 8.0\n.target sm_90\n.address_size 64\n")
            path = f.name
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                self.assertEqual(chk.main([path, "-q"]), 3)
                self.assertEqual(chk.main([path, "--expect-plain"]), 3)
                self.assertEqual(chk.main([path, "--expect-flagged", "k"]), 3)
        finally:
            os.unlink(path)
        self.assertIn("no kernel", out.getvalue())

    def test_expect_flagged(self):
        body = "\tld.global.u32 %r2, [%rd7];\n"
        self.assertEqual(run(body, "--expect-flagged", "k")[0], 0)
        self.assertEqual(run(body, "--expect-flagged", "nothing")[0], 1)
        self.assertEqual(run("\tgriddepcontrol.wait;\n", "--expect-flagged", "k")[0], 1)


if __name__ == "__main__":
    unittest.main()

//! The `torch.save` state-dict reader (`formats::torch_pt`): BGE-M3's real
//! head files, archives torch wrote with other dtypes and layouts
//! (`tests/data/torch_pt/`), and malformed inputs built by hand
//! (`fuzz/pt_writer.rs`), each refused with a named error.

#[path = "../../fuzz/pt_writer.rs"]
mod pt_writer;

use std::borrow::Cow;

use embedder::formats::torch_pt::{self, PtDType, PtTensor};
use embedder::formats::ReadOptions;
use embedder::ErrorKind;

use crate::common::{repo, shared_dir};
use pt_writer::{f32_bytes, state_dict, torch_zip, Pickle};

fn bgem3(file: &str) -> Vec<u8> {
    std::fs::read(
        shared_dir()
            .join("reference/architectures/bgem3-tiny")
            .join(file),
    )
    .unwrap()
}

fn summary(ts: &[PtTensor<'_>]) -> Vec<(String, PtDType, Vec<usize>)> {
    ts.iter()
        .map(|t| (t.name.clone(), t.dtype, t.shape.clone()))
        .collect()
}

/// The CRC32 the central directory records for `name`.
fn stored_crc(file: &[u8], name: &str) -> u32 {
    torch_pt::zip_entries(file)
        .unwrap()
        .into_iter()
        .find(|e| e.name == name)
        .unwrap()
        .crc32
}

#[test]
fn bgem3_sparse_linear() {
    let file = bgem3("sparse_linear.pt");
    let ts = torch_pt::read_state_dict(&file).unwrap();
    assert_eq!(
        summary(&ts),
        [
            ("weight".to_string(), PtDType::F32, vec![1, 64]),
            ("bias".to_string(), PtDType::F32, vec![1]),
        ]
    );
    let (w, b) = (&ts[0], &ts[1]);
    assert!(matches!(w.data, Cow::Borrowed(_)) && w.is_contiguous());
    assert_eq!((w.storage.as_str(), b.storage.as_str()), ("0", "1"));
    assert_eq!(w.strides, [64, 1]);
    // The bytes are the storage entries' (CRC as the zip records it, and as
    // Python's zipfile + zlib computed it for these files).
    assert_eq!(pt_writer::crc32(&w.data), 0x927f_e1ab);
    assert_eq!(
        pt_writer::crc32(&w.data),
        stored_crc(&file, "sparse_linear/data/0")
    );
    assert_eq!(pt_writer::crc32(&b.data), 0x3972_cafb);
    let wv = w.to_f32();
    assert_eq!(wv.len(), 64);
    assert_eq!(wv[0], -0.438_720_5);
    assert_eq!(wv[63], -0.352_167_07);
    assert_eq!(b.to_f32(), [0.05]);
}

#[test]
fn bgem3_colbert_linear() {
    let file = bgem3("colbert_linear.pt");
    let ts = torch_pt::read_state_dict(&file).unwrap();
    assert_eq!(
        summary(&ts),
        [
            ("weight".to_string(), PtDType::F32, vec![64, 64]),
            ("bias".to_string(), PtDType::F32, vec![64]),
        ]
    );
    assert_eq!(pt_writer::crc32(&ts[0].data), 0x6330_7c88);
    assert_eq!(pt_writer::crc32(&ts[1].data), 0x8514_2eac);
    let w = ts[0].to_f32();
    assert_eq!((w[0], w[4095]), (0.263_471_45, 0.405_694_57));
    let b = ts[1].to_f32();
    assert_eq!((b[0], b[63]), (-0.081_609_21, -0.045_097_08));
    // The path variant reads the same, owning the bytes.
    let path = shared_dir().join("reference/architectures/bgem3-tiny/colbert_linear.pt");
    let owned = torch_pt::read_state_dict_path(&path).unwrap();
    assert_eq!(owned, ts);
    assert!(matches!(owned[0].data, Cow::Owned(_)));
}

/// Files torch 2.15 wrote (`tests/data/torch_pt/make.py`), with the values it
/// printed alongside (`*.json`).
#[test]
fn files_torch_wrote() {
    let dir = repo().join("tests/data/torch_pt");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "pt") {
            continue;
        }
        let expect: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p.with_extension("json")).unwrap())
                .unwrap();
        let ts = torch_pt::read_state_dict_path(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let want = expect.as_array().unwrap();
        assert_eq!(ts.len(), want.len(), "{p:?}");
        for (t, w) in ts.iter().zip(want) {
            let ctx = format!("{p:?} {}", t.name);
            assert_eq!(t.name, w["name"].as_str().unwrap(), "{ctx}");
            assert_eq!(t.dtype.name(), w["dtype"].as_str().unwrap(), "{ctx}");
            let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
            assert_eq!(t.shape, shape, "{ctx}");
            let strides: Vec<usize> = serde_json::from_value(w["stride"].clone()).unwrap();
            assert_eq!(t.strides, strides, "{ctx}");
            assert_eq!(
                t.storage_offset,
                w["offset"].as_u64().unwrap() as usize,
                "{ctx}"
            );
            let values: Vec<f64> = serde_json::from_value(w["values"].clone()).unwrap();
            let got = t.to_f32();
            assert_eq!(got.len(), values.len(), "{ctx}");
            for (g, v) in got.iter().zip(&values) {
                assert_eq!(*g, *v as f32, "{ctx}");
            }
            // Raw bytes: the contiguous row-major bytes torch printed as hex.
            let hex: String = t.data.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, w["hex"].as_str().unwrap(), "{ctx}");
        }
        n += 1;
    }
    assert!(n >= 4, "only {n} torch-written files in {dir:?}");
}

/// A synthetic archive with every storage type, a transposed view, a shared
/// storage and a nested dict.
#[test]
fn dtypes_views_shared_and_nested() {
    let six = f32_bytes(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let mut p = Pickle::new();
    p.raw(b"}").mark();
    p.str("t")
        .tensor("FloatStorage", "0", 6, 0, &[3, 2], &[1, 3]);
    p.str("tail").tensor("FloatStorage", "0", 6, 4, &[2], &[1]);
    p.str("inner").raw(b"}").mark();
    p.str("h").tensor("HalfStorage", "1", 2, 0, &[2], &[1]);
    p.str("b").tensor("BFloat16Storage", "2", 1, 0, &[1], &[1]);
    p.str("l").tensor("LongStorage", "3", 1, 0, &[], &[]);
    p.str("flag").tensor("BoolStorage", "4", 2, 0, &[2], &[1]);
    p.str("step").int(7);
    p.raw(b"u");
    p.str("bcast")
        .tensor("FloatStorage", "0", 6, 1, &[2, 3], &[0, 1]);
    p.raw(b"u");
    let pkl = p.finish();
    let half: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
        .collect();
    let bf = half::bf16::from_f32(0.25).to_le_bytes().to_vec();
    let file = torch_zip(
        "m",
        &pkl,
        &[
            ("0", six),
            ("1", half),
            ("2", bf),
            ("3", (-3i64).to_le_bytes().to_vec()),
            ("4", vec![1, 0]),
        ],
    );
    let ts = torch_pt::read_state_dict(&file).unwrap();
    let names: Vec<&str> = ts.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "t",
            "tail",
            "inner.h",
            "inner.b",
            "inner.l",
            "inner.flag",
            "bcast"
        ]
    );
    assert!(!ts[0].is_contiguous());
    assert_eq!(ts[0].to_f32(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(ts[1].to_f32(), [4.0, 5.0]);
    assert_eq!((ts[1].storage.as_str(), ts[1].storage_offset), ("0", 4));
    assert_eq!(ts[2].to_f32(), [1.5, -2.0]);
    assert_eq!(ts[3].to_f32(), [0.25]);
    assert_eq!((ts[4].to_f32(), ts[4].shape.len()), (vec![-3.0], 0));
    assert_eq!(ts[5].to_f32(), [1.0, 0.0]);
    assert_eq!(ts[6].to_f32(), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    assert_eq!(PtDType::F16.to_dtype(), Some(embedder::DType::F16));
    assert_eq!(PtDType::I64.to_dtype(), None);
}

fn err_of(file: &[u8]) -> embedder::Error {
    torch_pt::read_state_dict(file).expect_err("must be refused")
}

fn one_tensor(pkl: &[u8]) -> Vec<u8> {
    torch_zip("m", pkl, &[("0", f32_bytes(&[1.0, 2.0, 3.0, 4.0]))])
}

#[test]
fn truncated_archives_are_errors() {
    let file = bgem3("sparse_linear.pt");
    for n in 0..file.len() {
        let e = err_of(&file[..n]);
        assert!(
            matches!(e.kind(), ErrorKind::UnknownFormat | ErrorKind::Format),
            "{n}: {e}"
        );
    }
    assert!(err_of(&file[..100])
        .to_string()
        .contains("not a zip archive"));
}

#[test]
fn bad_crc_is_a_checksum_error_unless_unchecked() {
    let mut file = bgem3("sparse_linear.pt");
    // The first byte of sparse_linear/data/0 (local header at 726, 64-byte aligned data).
    let at = (726 + 30 + 20 + 4usize).next_multiple_of(64);
    assert_eq!(
        f32::from_le_bytes(file[at..at + 4].try_into().unwrap()),
        -0.438_720_5
    );
    file[at + 3] ^= 0x40;
    let e = err_of(&file);
    assert_eq!(e.kind(), ErrorKind::Checksum, "{e}");
    assert!(e.to_string().contains("sparse_linear/data/0"), "{e}");
    let opts = ReadOptions {
        verify_checksums: false,
    };
    let ts = torch_pt::read_state_dict_with(&file, opts).unwrap();
    assert_ne!(ts[0].to_f32()[0], -0.438_720_5);
}

#[test]
fn disallowed_globals_are_named() {
    // os.system("echo pwned"): GLOBAL + REDUCE, the classic pickle exploit.
    let mut p = Pickle::new();
    p.global("os", "system").mark().str("echo pwned").raw(b"tR");
    let e = err_of(&one_tensor(&p.finish()));
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("'os.system' is not allowed"), "{e}");
    for (m, n) in [
        ("builtins", "eval"),
        ("torch", "load"),
        ("torch._utils", "x"),
    ] {
        let mut p = Pickle::new();
        p.global(m, n);
        let e = err_of(&one_tensor(&p.finish()));
        assert!(e.to_string().contains(&format!("'{m}.{n}'")), "{e}");
    }
    // STACK_GLOBAL (protocol 4) goes through the same allowlist.
    let mut p = Pickle::new();
    p.raw(&[0x8c, 2])
        .raw(b"os")
        .raw(&[0x8c, 6])
        .raw(b"system")
        .raw(&[0x93]);
    let e = err_of(&one_tensor(&p.finish()));
    assert!(e.to_string().contains("'os.system'"), "{e}");
}

#[test]
fn reduce_of_a_non_allowed_callable_is_refused() {
    // An allowed name that is not a function: a storage class.
    let mut p = Pickle::new();
    p.global("torch", "FloatStorage").raw(b")R");
    let e = err_of(&one_tensor(&p.finish()));
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("REDUCE of torch.FloatStorage"),
        "{e}"
    );
    // A string as the callable.
    let mut p = Pickle::new();
    p.str("os.system").raw(b")R");
    let e = err_of(&one_tensor(&p.finish()));
    assert!(e.to_string().contains("REDUCE of a str"), "{e}");
    // OrderedDict with arguments.
    let mut p = Pickle::new();
    p.global("collections", "OrderedDict")
        .mark()
        .int(1)
        .raw(b"tR");
    let e = err_of(&one_tensor(&p.finish()));
    assert!(e.to_string().contains("OrderedDict with arguments"), "{e}");
}

#[test]
fn disallowed_opcodes_are_named() {
    for (code, name) in [
        (b'i', "INST"),
        (b'o', "OBJ"),
        (0x81, "NEWOBJ"),
        (0x92, "NEWOBJ_EX"),
        (b'P', "PERSID"),
        (b'S', "STRING"),
        (0x82, "EXT1"),
        (0x97, "NEXT_BUFFER"),
        (0xff, "unknown"),
    ] {
        let mut p = Pickle::new();
        p.raw(&[code]);
        let e = err_of(&one_tensor(&p.finish()));
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(
            e.to_string()
                .contains(&format!("opcode {name} (0x{code:02x}) is not allowed")),
            "{e}"
        );
    }
}

#[test]
fn huge_sizes_are_refused_before_allocating() {
    // A storage declaring 2^62 elements.
    let pkl = state_dict(&[("w", "FloatStorage", "0", 1 << 62, 0, &[4], &[1])]);
    let e = err_of(&one_tensor(&pkl));
    assert!(
        e.to_string().contains("declares 4611686018427387904 x f32"),
        "{e}"
    );
    // A shape whose product overflows, and one past its storage.
    let big = 1usize << 40;
    let pkl = state_dict(&[("w", "FloatStorage", "0", 4, 0, &[big, big], &[1, 1])]);
    let e = err_of(&one_tensor(&pkl));
    assert!(e.to_string().contains("overflows"), "{e}");
    let pkl = state_dict(&[("w", "FloatStorage", "0", 4, 0, &[big], &[1])]);
    let e = err_of(&one_tensor(&pkl));
    assert!(e.to_string().contains("reaches past storage '0'"), "{e}");
    // A string length of 4 GiB in a short pickle.
    let mut p = Pickle::new();
    p.raw(b"X\xff\xff\xff\xff");
    let e = err_of(&one_tensor(&p.finish()));
    assert!(e.to_string().contains("BINUNICODE"), "{e}");
    // Memo indices are keys, not sizes.
    let mut p = Pickle::new();
    p.raw(b"}r\xff\xff\xff\xff0j\xff\xff\xff\xff");
    assert!(torch_pt::read_state_dict(&one_tensor(&p.finish()))
        .unwrap()
        .is_empty());
    // Too many dimensions.
    let dims = [1usize; 40];
    let pkl = state_dict(&[("w", "FloatStorage", "0", 4, 0, &dims, &dims)]);
    let e = err_of(&one_tensor(&pkl));
    assert!(e.to_string().contains("40 dimensions"), "{e}");
}

#[test]
fn deep_nesting_is_refused_without_recursion() {
    // 40 dicts inside each other.
    let mut p = Pickle::new();
    for i in 0..40 {
        p.raw(b"}").str(&format!("k{i}"));
    }
    p.tensor("FloatStorage", "0", 4, 0, &[4], &[1]);
    for _ in 0..40 {
        p.raw(b"s");
    }
    let e = err_of(&one_tensor(&p.finish()));
    assert!(e.to_string().contains("nests deeper than 32"), "{e}");
    // A dict that contains itself.
    let mut p = Pickle::new();
    p.raw(b"}q\x00X\x01\x00\x00\x00ah\x00s");
    let e = err_of(&one_tensor(&p.finish()));
    assert!(e.to_string().contains("nests deeper"), "{e}");
    // A million MARKs and empty tuples: no recursion, a clean error at the end.
    let mut p = Pickle::new();
    p.raw(&b"(".repeat(1 << 20));
    let e = err_of(&one_tensor(&p.finish()));
    assert!(e.to_string().contains("empty stack"), "{e}");
    // Shared dicts referenced many times: bounded visits.
    let mut p = Pickle::new();
    p.raw(b"}")
        .str("t")
        .tensor("FloatStorage", "0", 4, 0, &[4], &[1])
        .raw(b"s");
    for level in 0..30u8 {
        p.raw(&[b'q', level])
            .raw(b"}")
            .str("a")
            .raw(&[b'h', level])
            .str("b");
        p.raw(&[b'h', level]).raw(b"s").raw(b"s");
    }
    // Refused either for the visits or, first, for the depth the shared
    // dicts reach (30 levels under the root: past the 32-level key cap).
    let e = err_of(&one_tensor(&p.finish()));
    let m = e.to_string();
    assert!(
        m.contains("too many times") || m.contains("nests deeper than"),
        "{e}"
    );
}

#[test]
fn wrong_storage_length_and_bounds_are_named() {
    let pkl = state_dict(&[("w", "FloatStorage", "0", 5, 0, &[5], &[1])]);
    let e = err_of(&one_tensor(&pkl));
    assert_eq!(e.kind(), ErrorKind::Format);
    assert!(
        e.to_string()
            .contains("storage '0' declares 5 x f32 elements but its entry has 16 bytes"),
        "{e}"
    );
    let pkl = state_dict(&[("w", "FloatStorage", "0", 4, 1, &[4], &[1])]);
    assert!(err_of(&one_tensor(&pkl))
        .to_string()
        .contains("reaches past"));
    let pkl = state_dict(&[("w", "FloatStorage", "0", 4, 0, &[2, 2], &[3, 1])]);
    assert!(err_of(&one_tensor(&pkl))
        .to_string()
        .contains("reaches past"));
    // A storage referenced with two sizes.
    let pkl = state_dict(&[
        ("a", "FloatStorage", "0", 4, 0, &[4], &[1]),
        ("b", "HalfStorage", "0", 8, 0, &[8], &[1]),
    ]);
    assert!(err_of(&one_tensor(&pkl))
        .to_string()
        .contains("referenced as"));
    // A storage key with no entry.
    let pkl = state_dict(&[("a", "FloatStorage", "9", 4, 0, &[4], &[1])]);
    assert!(err_of(&one_tensor(&pkl))
        .to_string()
        .contains("no entry 'm/data/9'"));
    // The pickle is not a dict.
    let mut p = Pickle::new();
    p.tensor("FloatStorage", "0", 4, 0, &[4], &[1]);
    assert!(err_of(&one_tensor(&p.finish()))
        .to_string()
        .contains("a tensor, not a state dict"));
}

#[test]
fn other_containers_are_refused_by_name() {
    // The legacy (pre-1.6) layout: a bare pickle stream.
    let e = err_of(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.");
    assert_eq!(e.kind(), ErrorKind::UnknownFormat);
    assert!(e.to_string().contains("legacy torch.save layout"), "{e}");
    // The same, as torch 2.15 writes it (_use_new_zipfile_serialization=False).
    let legacy = std::fs::read(repo().join("tests/data/torch_pt/legacy.bin")).unwrap();
    let e = err_of(&legacy);
    assert!(e.to_string().contains("legacy torch.save layout"), "{e}");
    // A deflated entry (method 8 in both headers).
    let good = state_dict(&[("w", "FloatStorage", "0", 4, 0, &[4], &[1])]);
    let mut file = one_tensor(&good);
    let entries = torch_pt::zip_entries(&file).unwrap();
    let pkl = &entries[0];
    let lh = pkl.local_header as usize;
    file[lh + 8] = 8;
    let cd = file.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    file[cd + 10] = 8;
    let e = err_of(&file);
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("'m/data.pkl' is deflated"), "{e}");
    // Big-endian storages.
    let mut e2 = vec![("m/data.pkl".to_string(), good.clone())];
    e2.push(("m/byteorder".to_string(), b"big".to_vec()));
    let e = err_of(&pt_writer::zip(&e2));
    assert!(e.to_string().contains("big-endian"), "{e}");
    // No data.pkl.
    let e = err_of(&pt_writer::zip(&[("x/y".to_string(), vec![1])]));
    assert!(e.to_string().contains("no '<name>/data.pkl'"), "{e}");
}

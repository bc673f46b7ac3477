#!/usr/bin/env python3
"""The example AMB writer of the seed document (shared/seeds/amb-format.md,
"Example Python Tool for Creating AMB Files"), transcribed unchanged, plus a
small command-line driver used by tests/it/containers.rs.

Usage: amb_seed_writer.py OUT.amb
Writes a file with two metadata/config dicts, the empty tokenizer section the
example produces, and a few float32 tensors (the example labels every tensor
FP32, so only float32 arrays are valid input), then prints the tensors as JSON
{name: {"shape": [...], "values": [...]}} on stdout.
"""
import json
import struct
import sys

import numpy as np


# ---- begin: transcribed from the seed document, unchanged ----
def write_amb_file(output_path, metadata, config, tokenizer_data, weights):
    """
    Write an AMB file.

    Args:
        output_path: Path to write the AMB file
        metadata: Dict containing model metadata
        config: Dict containing model configuration
        tokenizer_data: Dict containing tokenizer data
        weights: Dict mapping tensor names to numpy arrays
    """
    # Serialize sections
    metadata_bytes = json.dumps(metadata).encode('utf-8')
    config_bytes = json.dumps(config).encode('utf-8')

    # Serialize tokenizer (simplified)
    tokenizer_bytes = b''
    # ... serialize tokenizer data

    # Open file for writing
    with open(output_path, 'wb') as f:
        # Write header placeholder
        f.write(b'AMBEE\x01\x00\x00')  # Magic + version + flags

        # Reserve space for section sizes
        section_sizes_pos = f.tell()
        f.write(b'\x00' * 20)  # 5 * 4 bytes for section sizes

        # Write metadata section
        metadata_pos = f.tell()
        f.write(metadata_bytes)

        # Write config section
        config_pos = f.tell()
        f.write(config_bytes)

        # Write tokenizer section
        tokenizer_pos = f.tell()
        f.write(tokenizer_bytes)

        # Write weights section
        weights_pos = f.tell()
        for name, tensor in weights.items():
            # Write tensor name
            name_bytes = name.encode('utf-8')
            f.write(struct.pack('<H', len(name_bytes)))
            f.write(name_bytes)

            # Write tensor shape
            f.write(struct.pack('<B', len(tensor.shape)))
            for dim in tensor.shape:
                f.write(struct.pack('<I', dim))

            # Write data type
            dtype_code = 0  # FP32
            f.write(struct.pack('<B', dtype_code))

            # Write data size
            data_size = tensor.nbytes
            f.write(struct.pack('<Q', data_size))

            # Write tensor data
            tensor.tofile(f)

            # Align to 8 bytes
            align = (8 - f.tell() % 8) % 8
            f.write(b'\x00' * align)

        # Calculate section sizes
        metadata_size = config_pos - metadata_pos
        config_size = tokenizer_pos - config_pos
        tokenizer_size = weights_pos - tokenizer_pos
        weights_size = f.tell() - weights_pos

        # Update header with section sizes
        f.seek(section_sizes_pos)
        f.write(struct.pack('<IIIQ', metadata_size, config_size,
                            tokenizer_size, weights_size))
# ---- end of the transcription ----


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(3)
    weights = {
        "transformer.wte": rng.standard_normal((5, 3)).astype(np.float32),
        "bert.embeddings.LayerNorm.gamma": np.arange(3, dtype=np.float32),
        "scalar": np.array(2.5, dtype=np.float32),
        "odd.name.x": rng.standard_normal((2, 2, 2)).astype(np.float32),
    }
    metadata = {"name": "seed-example", "family": "Phi", "creator": "Microsoft",
                "license": "MIT", "created": "2024-06-22", "version": "1.0",
                "tags": ["conversational", "coding"], "description": "Ünïcode ok"}
    config = {"architecture": "phi", "n_vocab": 32000, "n_embd": 2048, "n_layers": 24,
              "n_heads": 16, "n_kv_heads": 16, "max_seq_len": 2048, "is_rope": True,
              "activation_fn": "silu", "rope_freq_base": 10000.0, "rope_scaling": 1.0,
              "quant": {"type": "int4_block", "block_size": 128, "scale_type": "fp16"}}
    write_amb_file(sys.argv[1], metadata, config, {}, weights)
    json.dump({k: {"shape": list(v.shape), "values": [float(x) for x in v.ravel()]}
               for k, v in weights.items()}, sys.stdout)


if __name__ == "__main__":
    main()

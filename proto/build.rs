//! Generates the CloudEvents gRPC protocol's messages and service (`proto/io/cloudevents/v1`)
//! with tonic-prost-build: client and server traits, no transport (this crate does no IO).

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_transport(false)
        .compile_protos(&["proto/io/cloudevents/v1/cloudevent.proto"], &["proto"])
}

package shdb.bulkload;

import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.spark.api.python.Converter;

/** A row key from Python (bytes, unpickled as byte[]) as HFileOutputFormat2's key. */
public final class ToRowKey implements Converter<Object, Object> {
  @Override
  public Object convert(Object obj) {
    return new ImmutableBytesWritable((byte[]) obj);
  }
}
